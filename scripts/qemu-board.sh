#!/bin/sh
# An emulated arm64 board with an SD card, made of Debian's packages (src/flashbed/boards/qemu.py):
#   scripts/qemu-board.sh --dir DIR start|stop|restart|on|off|cycle|status|url|build
# Its power switch for flashbed: --power-cmd 'scripts/qemu-board.sh --dir DIR {action}'
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
py="$here/.venv/bin/python"
[ -x "$py" ] || { echo "qemu-board.sh: no project environment: run make setup first" >&2; exit 2; }
exec "$py" -m flashbed.boards.qemu "$@"
