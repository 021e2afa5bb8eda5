"""Benchmarks of flashbed's own machinery (run with `python -m flashbed.bench.<name>`)."""
