"""YAFFS2 in user space: its core and direct interface from Debian's u-boot
source, flashbed's own MTD driver and FUSE front (csrc/, GPL-2.0), built once
into the cache."""
