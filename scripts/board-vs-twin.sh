#!/bin/bash
# A board against its twin, in four steps: the probe of the board's device writes a preset (the
# twin), the same studies run on the board and on the twin in the lab, and `flashbed report BOARD
# TWIN` compares them (the agreement table: the same best filesystem? Kendall tau of the orders).
#
#   scripts/board-vs-twin.sh --target ssh://USER@HOST --device /dev/mmcblkNpM [--ssh-config FILE]
#       [--ssh-key FILE] [--power-cmd 'CMD {action}'] [--boot-wait SECONDS] [OPTIONS] OUT
#   scripts/board-vs-twin.sh --board-dir DIR [OPTIONS] OUT      (the emulated board, qemu-board.sh)
#
# OPTIONS: --study LIST (default bigfile,mount, and powercut with --power-cmd), --fs LIST (default
# ext4,f2fs), --set STUDY.PARAM=VALUE (repeatable; both runs), --iterations N, --runtime SECONDS
# (the probe's fio jobs, default 10), --step LIST (probe,board,twin,report: the default, all),
# --dry-run (print the commands only).
#
# OUT holds twin.toml, probe/, board/, twin/ and compare/. A step whose output is there is not made
# again: a run directory is resumed (`flashbed run --resume`), a written preset kept. So the steps
# can be run apart (the board's under one lock, the lab's under another) or again after Ctrl-C.
# --destroy-data-on is given for the board's device: the probe and the studies overwrite all of it.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
fb="$here/.venv/bin/flashbed"
me="board-vs-twin.sh"

die() { echo "$me: $*" >&2; exit 2; }
need() { [ "$2" -ge 2 ] || die "$1 needs a value (see the head of scripts/board-vs-twin.sh)"; }

target="" device="" board_dir="" ssh_config="" ssh_key="" power_cmd="" boot_wait="" studies="" fs="ext4,f2fs"
runtime="10" steps="probe,board,twin,report" dry=0 out="" iterations=""
sets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --target) need "$1" $#; target=$2; shift 2 ;;
        --device) need "$1" $#; device=$2; shift 2 ;;
        --board-dir) need "$1" $#; board_dir=$2; shift 2 ;;
        --ssh-config) need "$1" $#; ssh_config=$2; shift 2 ;;
        --ssh-key) need "$1" $#; ssh_key=$2; shift 2 ;;
        --power-cmd) need "$1" $#; power_cmd=$2; shift 2 ;;
        --boot-wait) need "$1" $#; boot_wait=$2; shift 2 ;;
        --study) need "$1" $#; studies=$2; shift 2 ;;
        --fs) need "$1" $#; fs=$2; shift 2 ;;
        --set) need "$1" $#; sets+=(--set "$2"); shift 2 ;;
        --iterations) need "$1" $#; iterations=$2; shift 2 ;;
        --runtime) need "$1" $#; runtime=$2; shift 2 ;;
        --step) need "$1" $#; steps=$2; shift 2 ;;
        --dry-run) dry=1; shift ;;
        -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see the head of scripts/board-vs-twin.sh)" ;;
        *) [ -z "$out" ] || die "one output directory: $out or $1"; out=$1; shift ;;
    esac
done

[ -n "$out" ] || die "give the output directory (OUT) last, e.g. $me --board-dir B runs/b-vs-t"
[ -x "$fb" ] || die "no project environment: run make setup first"
for s in ${steps//,/ }; do
    case "$s" in probe|board|twin|report) ;; *) die "--step $s: the steps are probe, board, twin, report" ;; esac
done
if [ -n "$board_dir" ]; then
    [ -z "$target" ] && [ -z "$device" ] && [ -z "$power_cmd" ] && [ -z "$ssh_config" ] ||
        die "--board-dir is the emulated board's directory: it names the target, device, ssh config and power switch; drop --target, --device, --ssh-config and --power-cmd"
    [ -f "$board_dir/board.json" ] || die "--board-dir $board_dir is no emulated board: make one with scripts/qemu-board.sh --dir $board_dir start"
    board_dir=$(cd "$board_dir" && pwd)
    ssh_config="$board_dir/ssh_config"
    power_cmd="$here/scripts/qemu-board.sh --dir $board_dir {action}"
    device=/dev/mmcblk0
elif [ -z "$target" ] || [ -z "$device" ]; then
    die "give the board: --target ssh://USER@HOST --device /dev/... (or --board-dir DIR for an emulated board)"
fi
if [ -z "$studies" ]; then
    studies="bigfile,mount"
    [ -z "$power_cmd" ] || studies="$studies,powercut"
fi
[ -z "$boot_wait" ] || [ -n "$power_cmd" ] || die "--boot-wait is the wait after --power-cmd's on: add --power-cmd, or drop it"

status=0
run() {  # print a command, then run it (not with --dry-run); a run whose cells failed (exit 1) lets the
    # next steps go on, the script then exits 1; any other failure ends it with its own code
    local a line=""
    for a in "$@"; do  # as a shell takes it back: quoted where a word needs it
        case "$a" in
            ''|*[!A-Za-z0-9_./=:@%+,-]*) line="$line '${a//\'/\'\\\'\'}'" ;;
            *) line="$line $a" ;;
        esac
    done
    echo "\$$line"
    [ "$dry" = 1 ] && return 0
    local rc=0
    "$@" || rc=$?
    [ "$rc" = 0 ] || [ "$rc" = 1 ] || exit "$rc"
    [ "$rc" = 0 ] || status=1
}
step() { case ",$steps," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
took() { echo "$me: $1 took $(( $(date +%s) - $2 ))s"; }

if [ -n "$board_dir" ] && { step probe || step board; }; then
    run "$here/scripts/qemu-board.sh" --dir "$board_dir" start
fi
[ "$dry" = 1 ] || [ -n "$target" ] || target=$("$here/scripts/qemu-board.sh" --dir "$board_dir" url)
[ -n "$target" ] || target='$(scripts/qemu-board.sh --dir '"$board_dir"' url)'
reach=()  # how to reach the board (a resumed run keeps its target: it is given again only these)
[ -z "$ssh_config" ] || reach+=(--ssh-config "$ssh_config")
[ -z "$ssh_key" ] || reach+=(--ssh-key "$ssh_key")
conn=(--target "$target" ${reach[@]+"${reach[@]}"})
power=()
[ -z "$power_cmd" ] || power+=(--power-cmd "$power_cmd")
[ -z "$boot_wait" ] || power+=(--boot-wait "$boot_wait")
what=(--study "$studies" --fs "$fs" ${sets[@]+"${sets[@]}"})
[ -z "$iterations" ] || what+=(--iterations "$iterations")
[ "$dry" = 1 ] || mkdir -p "$out"

if step probe; then
    t=$(date +%s)
    if [ -f "$out/twin.toml" ]; then
        echo "$me: probe: $out/twin.toml is there (remove it to probe again)"
    else
        run "$fb" probe "${conn[@]}" --device "$device" --destroy-data-on "$device" --runtime "$runtime" \
            --out "$out/probe" --write-preset "$out/twin.toml"
        took "the probe" "$t"
    fi
fi
if step board; then
    t=$(date +%s)
    if [ -f "$out/board/manifest.json" ]; then
        run "$fb" run --resume "$out/board" ${reach[@]+"${reach[@]}"} ${power[@]+"${power[@]}"} --destroy-data-on "$device" \
            --no-report
    else
        run "$fb" run "${conn[@]}" ${power[@]+"${power[@]}"} --device "$device" --destroy-data-on "$device" \
            "${what[@]}" --out "$out/board" --no-report
    fi
    took "the board's run" "$t"
fi
if step twin; then
    [ "$dry" = 1 ] || [ -f "$out/twin.toml" ] || die "no $out/twin.toml: run the probe step first (--step probe)"
    t=$(date +%s)
    if [ -f "$out/twin/manifest.json" ]; then
        run "$fb" run --resume "$out/twin" --no-report
    else
        run "$fb" run --device "$out/twin.toml" "${what[@]}" --out "$out/twin" --no-report
    fi
    took "the twin's run" "$t"
fi
if step report; then
    run "$fb" report "$out/board" "$out/twin" --out "$out/compare" --force
fi
exit "$status"
