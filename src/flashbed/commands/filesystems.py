"""`flashbed filesystems [FS]`: the filesystem catalogue, two lines each; with FS, its options
catalogue (fsoptions.py): the options that matter on flash with their values, costs and
sources, those that can lose acknowledged data marked, then every other name it takes."""

from __future__ import annotations

import argparse
import textwrap


def add_parser(sub) -> None:
    p = sub.add_parser("filesystems", help="list the filesystem catalogue, or one filesystem's options")
    p.add_argument("fs", nargs="?", help="a filesystem: list its mkfs and mount options (e.g. ext4, f2fs)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from .. import filesystems as fscat
    if getattr(args, "fs", None):
        return _options(fscat.get(args.fs))
    for name, fs in fscat.CATALOGUE.items():
        mkfs = " ".join(a for a in fs.mkfs if "{" not in a)
        extra = f" (variants: {', '.join(f'+{c}' for c in fs.compressors)})" if fs.read_only \
            else ""
        print(f"{name:16} {fs.media:6} mkfs: {mkfs:28} fsck: "
              f"{' '.join(fs.check) if fs.check else '(none)':24} {fs.description}{extra}")
        print(f"{'':23} recovery: {fs.recovery}; online resize: {fs.online_resize} "
              f"({fscat.FACTS_SOURCE[fs.facts]})")
    print("options of one filesystem: flashbed filesystems FS (a variant takes them: FS+o:OPTS+mkfs:FLAGS)")
    return 0


def _options(fs) -> int:
    from .. import fsoptions as fo
    print(f"{fs.name}: {fs.description}")
    if fs.read_only:
        print(f"  a read-only image: no mkfs or mount options; its variants are one compressor: "
              f"{', '.join(f'{fs.name}+{c}' for c in fs.compressors)}")
        return 0
    if not fs.mounting.in_kernel:
        print("  runs in user space (FUSE, flashbed's daemon): it takes no mkfs or mount options")
        return 0
    wrap = textwrap.TextWrapper(width=110, initial_indent="      ", subsequent_indent="      ")
    for e in fo.entries(fs.fstype):
        mark = "  RISKY: can lose acknowledged data" if e.loses_data else ""
        print(f"  {e.kind:5} {e.name}{mark}")
        print(wrap.fill(f"try: {', '.join(e.values)}" + (f" (needs mkfs {' '.join(e.needs)})" if e.needs else "")
                        + (f"; run --tune tries {', '.join(e.tune)}" if e.tune else "")))
        print(wrap.fill(f"on flash: {e.why}; cost: {e.cost}"))
        if e.loses_data:
            print(wrap.fill(f"risky ({', '.join(e.risky_values) or 'any use'}): {e.loses_data}"))
        print(wrap.fill(f"source: {e.source}"))
    names, source = fo.KERNEL_MOUNT.get(fs.fstype, ((), ""))
    print(textwrap.fill(f"every mount option it takes ({source}; and {fo.VFS_SOURCE}): "
                        f"{' '.join(sorted(names))}; {' '.join(fo.VFS_MOUNT)}", width=110,
                        initial_indent="  ", subsequent_indent="    "))
    flags, msource = fo.MKFS_FLAGS.get(fs.mkfs[0], ({}, ""))
    if fs.media == "block" and flags:
        print(textwrap.fill(f"mkfs flags ({fs.mkfs[0]}, {msource}): {' '.join(sorted(flags))}", width=110,
                            initial_indent="  ", subsequent_indent="    "))
    print(f"  a variant: {fs.name}+o:OPTION[=VALUE],...+mkfs:FLAGS (e.g. "
          f"{_example(fs.fstype, fs.name)}); a trial mkfs and mount checks the values before a run")
    return 0


def _example(fstype: str, name: str) -> str:
    return {"f2fs": "'f2fs+mkfs:-O extra_attr,compression+o:compress_algorithm=lz4'",
            "btrfs": "btrfs+o:compress=zstd:1,commit=60"}.get(fstype, f"{name}+o:noatime")
