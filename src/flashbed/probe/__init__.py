"""`flashbed probe`: measure a device with Debian's flashbench and fio in the
lab, print its geometry and rates, and write a preset fitted to them."""
