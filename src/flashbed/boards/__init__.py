"""Emulated boards for the board path's own tests (qemu.py): a board of stock Debian parts,
driven over SSH like any other, with a power switch that really cuts."""
