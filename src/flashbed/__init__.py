"""flashbed: choose and tune Linux filesystems for flash storage."""

__version__ = "0.1.0"
