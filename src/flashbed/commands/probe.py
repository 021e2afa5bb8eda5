"""`flashbed probe DEVICE [--write-preset FILE]`: arguments checked here, the
work in probe/lab.py, the text in probe/render.py, the preset in probe/fit.py."""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
from pathlib import Path

from .. import options, writeguard
from ..devices import presets
from ..errors import FlashbedError


def add_parser(sub) -> None:
    from ..options import seconds
    p = sub.add_parser("probe", help="measure a device with flashbench and fio in the lab; optionally write a preset")
    p.set_defaults(handler=run)
    p.add_argument("device", nargs="?", help="preset name or preset file, optionally @SIZE (e.g. "
                   "lexar-c10-16g@256M), or a real block device (/dev/sdX, /dev/mmcblkN): the probe writes all of it")
    p.add_argument("--device", dest="device_opt", metavar="DEVICE", help="the same as DEVICE (with --target: the "
                   "board's device, e.g. /dev/mmcblk0p3)")
    p.add_argument("--target", metavar="ssh://USER@HOST[:PORT]", help="probe a board's own device over SSH, with "
                   "the board's flashbench and fio (this machine's flashbench is copied over when the board has "
                   "none and the architectures match)")
    p.add_argument("--ssh-key", metavar="FILE", help="the key for --target")
    p.add_argument("--ssh-config", metavar="FILE", help="an ssh_config for --target instead of your own")
    p.add_argument("--destroy-data-on", action="append", default=[], metavar="DEVICE",
                   help="allow probing a real device that carries data (a filesystem or partition table): "
                   "repeat its path")
    p.add_argument("--write-preset", type=options.path, metavar="FILE", help="write a preset fitted to what was measured "
                   "(a new .toml file; never inside a run directory)")
    p.add_argument("--force", action="store_true", help="let --write-preset replace an existing file, and --out be "
                   "a directory of yours that holds files (probe.json and the raw outputs there are replaced)")
    p.add_argument("--out", type=options.path, help="a new or empty directory for raw outputs and probe.json, or one a probe "
                   "wrote before (default: runs/probe-...)")
    p.add_argument("--runtime", type=seconds, default=10.0, help="seconds per fio rate job (default 10)")
    p.add_argument("--max-open", type=int, default=8, help="most AUs the open-AU test tries (default 8)")
    p.add_argument("--clock", default="real", help="real (default) or virtual: an emulated device's requests "
                   "then take the model's time whatever the host's load, and the random jobs count requests")


def run(args: argparse.Namespace) -> int:
    from .. import clock
    args.lab_clock = clock.parse(args.clock)
    if args.max_open < 2:
        raise FlashbedError("--max-open must be at least 2 (one AU is the baseline)")
    args.preset_to = None
    if args.write_preset is not None:
        if args.write_preset.is_dir():  # an example that keeps the .toml the next check asks for
            raise FlashbedError(f"--write-preset {args.write_preset} is a directory: give a preset file path, e.g. "
                                f"{args.write_preset / 'mypart.toml'}")
        if args.write_preset.suffix != ".toml":
            raise FlashbedError(f"--write-preset {args.write_preset}: a preset file ends in .toml")
        args.preset_to = writeguard.check(args.write_preset, "--write-preset", writeguard.Output.FILE,
                                          force=args.force)
    elif args.force and args.out is None:
        raise FlashbedError("--force lets --write-preset replace a file and --out take a directory that holds "
                            "files: give --write-preset FILE or --out DIR, or drop --force")
    if args.out is not None:
        writeguard.check(args.out, "--out", writeguard.Output.DIR, mark="probe.json", force=args.force)
    if args.device and args.device_opt:
        raise FlashbedError(f"give the device once: {args.device} or --device {args.device_opt}")
    args.device = args.device or args.device_opt
    if not args.device:
        raise FlashbedError("flashbed probe needs a device: a preset (e.g. lexar-c10-16g@256M), a real device, or "
                            "with --target the board's (--device /dev/mmcblk0p3)")
    from .. import targets
    if args.target:
        target = targets.kind(args.target).for_probe(args)  # checked before the board is reached
    elif args.ssh_key or args.ssh_config:
        raise FlashbedError(f"--{'ssh-key' if args.ssh_key else 'ssh-config'} is for --target ssh://...: add "
                            f"--target, or drop it")
    else:
        target = targets.LabTarget()
    with target:
        return _probe(args, target, target.probe_device(args.device, tuple(args.destroy_data_on)))


def _probe(args: argparse.Namespace, target, device) -> int:
    from ..probe import fit, lab, render
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    out = args.out or Path("runs") / f"probe-{device.label.replace('@', '-').replace('/', '-')}-{stamp}"
    out = writeguard.make_dir(writeguard.check(out, "--out", writeguard.Output.DIR, mark="probe.json",
                                               force=args.force and args.out is not None))
    from .. import clock
    runs_on, note = clock.effective(args.lab_clock, device.backend)
    if note:
        print(note)
    result = lab.probe(device, out, target.probe_site(device, runs_on), max_open=args.max_open, runtime=args.runtime)
    for name, text in result.raw.items():
        writeguard.write_into(out, f"flashbench-{name}.txt", text, str(args.out or out))
    print(render.text(result))
    print(f"raw outputs and probe.json: {out}")
    if args.preset_to is not None:
        text = fit.preset_toml(result, device, args.write_preset.stem)
        with tempfile.TemporaryDirectory(prefix="flashbed-preset-") as tmp:  # the preset must load before it is written
            (Path(tmp) / args.write_preset.name).write_text(text)
            presets.load_spec(str(Path(tmp) / args.write_preset.name))
        writeguard.write_file(args.preset_to, text)
        print(f"preset: {args.write_preset} (use --device {args.write_preset})")
    return 0
