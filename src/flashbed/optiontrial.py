"""A trial of the options a variant gives itself, at plan time, before any cell runs.

The catalogue (fsoptions.py) knows every option's name; only mkfs and the kernel know which
values they take (ext4 refuses commit=abc, xfs a logbsize that is no power of two from 16k to
256k, mkfs.f2fs a feature it lacks). So each variant with options of its own is made and
mounted once on a small sparse device in the lab kernels the run uses, in one boot for them
all, and the first refusal is one line with the tool's or the kernel's own message (the
filesystem's line in the kernel log, else mount's). The mount's options as /proc/mounts shows
them are kept with the result. Results are cached per (spec, kernel build, mkfs tool), so a
run started again does not boot for them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable

from . import filesystems as fscat
from .errors import FlashbedError
from .lab.boundary import BlockDevice, BootSpec, Step
from .paths import cache_dir
from .variants import FsVariant

TRIAL_MNT = "/mnt"
MIN_DEVICE = 512 * 1024 * 1024  # sparse: only what mkfs writes takes space (xfs needs 300 MiB)
_MOUNT_LINE = "flashbed-mounted:"
_RC = "flashbed-rc:"


@dataclass(frozen=True)
class Trial:
    """What one variant's trial found: the stage that refused it ('' when none did) and the message."""

    spec: str
    kernel: str
    stage: str = ""  # "mkfs" or "mount"
    message: str = ""
    mounted: str = ""  # the options in effect, as /proc/mounts shows them
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.stage

    def line(self) -> str:
        tool = self.spec.partition("+")[0]
        who = "mkfs" if self.stage == "mkfs" else f"the lab kernel {self.kernel}"
        return (f"{self.spec}: {who} refuses it on a trial device: {self.message or '(no message)'}; "
                f"nothing was run (`flashbed filesystems {tool}` lists the options and values to try)")


def _talking(v: FsVariant) -> FsVariant:
    """`v` with its mkfs not quiet: a quiet mkfs.f2fs refuses a feature without a word."""
    def loud(fs):
        return fs and dataclasses.replace(fs, mkfs=tuple(a for a in fs.mkfs if a not in ("-q", "--quiet")))
    return dataclasses.replace(v, fs=loud(v.fs), lower=loud(v.lower))


def trial_steps(variants: list[FsVariant]) -> list[Step]:
    """For each variant: clear the log, make, mount, print the mount's options and the log,
    unmount. Every step ends well and prints its command's status (the agent stops at a failed
    step, and the next variant's trial must still run)."""
    steps: list[Step] = []
    for i, v in enumerate(variants):
        make = " && ".join([v.fs.clear_log_cmd(), *_talking(v).make_cmds()])
        steps.append(Step(f"mkfs{i}", f"( {make} ); echo {_RC}$?", timeout=180))
        mount = " && ".join([f"mkdir -p {TRIAL_MNT}", *v.mount_cmds(TRIAL_MNT)])
        umount = " && ".join(v.umount_cmds(TRIAL_MNT))
        steps.append(Step(f"mount{i}", f"( {mount} ); rc=$?; {v.fs.log_cmd()}; "
                                       f"echo {_MOUNT_LINE}$(awk '$2 == \"{TRIAL_MNT}\" {{print $4}}' /proc/mounts"
                                       f" | tail -n 1); [ $rc = 0 ] && ( {umount} ); echo {_RC}$rc", timeout=120))
    return steps


def _rc(step) -> int | None:
    """The status a trial step printed (None: it printed none: it did not finish)."""
    if step is None or not step.status.ok:
        return None
    said = [ln[len(_RC):] for ln in step.stdout.splitlines() if ln.startswith(_RC)]
    return int(said[-1]) if said and said[-1].strip().isdigit() else None


def _said(v: FsVariant, ln: str) -> bool:
    """A kernel log line of this filesystem (its log prefix, or its type's name as the mount API says it)."""
    return bool(re.search(v.fs.log_prefix or re.escape(v.fs.fstype), ln)
                or re.match(rf"\[\s*[\d.]+\]\s*{re.escape(v.fs.fstype)}:", ln))


def _message(v: FsVariant, stdout: str, stderr: str) -> str:
    """The kernel's own line about the refusal (its filesystem's, in the log), else the tool's."""
    kernel = [ln for ln in stdout.splitlines() if _said(v, ln)]
    said = [ln.strip() for ln in stderr.splitlines() if ln.strip() and "dmesg(1)" not in ln]
    text = kernel[-1] if kernel else (said[-1] if said else "")
    return _plain(text)


def _plain(line: str) -> str:
    return re.sub(r"^\[\s*[\d.]+\]\s*", "", line).strip()


def judge(v: FsVariant, kernel: str, steps) -> Trial:
    """The trial of `v` from its two steps' results (None: the boot ended before them)."""
    mkfs, mount = steps
    mkfs_rc, mount_rc = _rc(mkfs), _rc(mount)
    if mkfs_rc is None:
        return Trial(v.spec, kernel, "mkfs", "the trial boot ended before mkfs finished")
    if mkfs_rc != 0:
        return Trial(v.spec, kernel, "mkfs", _mkfs_message((mkfs.stderr + "\n\n" + mkfs.stdout).splitlines()))
    if mount_rc is None:
        return Trial(v.spec, kernel, "mount", "the trial boot ended before the mount finished")
    mounted = next((ln[len(_MOUNT_LINE):] for ln in mount.stdout.splitlines() if ln.startswith(_MOUNT_LINE)), "")
    if mount_rc != 0:
        return Trial(v.spec, kernel, "mount", _message(v, mount.stdout, mount.stderr))
    said = [_plain(ln) for ln in mount.stdout.splitlines() if _said(v, ln)]
    # a mount that works but drops an option (f2fs: "Image doesn't support compression") did
    # not take it: refused like a mount that fails
    dropped = [ln for ln in said if re.search(r"(?i)(doesn't|does not|not) support|ignor|unsupported", ln)]
    if dropped:
        return Trial(v.spec, kernel, "mount", dropped[-1] + " (the mount went on without the option)")
    warnings = [ln for ln in said if re.search(r"(?i)warn|deprecat", ln)]
    warnings += [f"the kernel mounted it with {took}, not {asked}" for asked, took in _changed(v, mounted)]
    return Trial(v.spec, kernel, mounted=mounted, warnings=warnings)


def _changed(v: FsVariant, mounted: str) -> list[tuple[str, str]]:
    """Given options the mount shows with another value (btrfs keeps compress=zstd:99 as zstd:15)."""
    shown = {o.partition("=")[0]: o for o in mounted.split(",") if "=" in o}
    out = []
    for o in v.mount_given:
        name, eq, _ = o.partition("=")
        if eq and name in shown and shown[name] != o and _norm(shown[name]) != _norm(o):
            out.append((o, shown[name]))
    return out


def _norm(option: str) -> str:
    """An option as compared: sizes in bytes (xfs shows logbsize=64k as 65536 on some kernels)."""
    name, _, value = option.partition("=")
    m = re.fullmatch(r"(\d+)([kKmMgG])", value)
    if m:
        value = str(int(m[1]) << {"k": 10, "m": 20, "g": 30}[m[2].lower()])
    return f"{name}={value}"


def _mkfs_message(lines: list[str]) -> str:
    """mkfs's own complaint: the first line that says what is wrong, not its usage text (the
    block from 'Usage' to a blank line, and the indented lines of its flags)."""
    said, usage = [], False
    for ln in lines:
        if re.match(r"(?i)\s*usage", ln):
            usage = True
        elif not ln.strip():
            usage = False
        elif not usage and not ln[:1].isspace() and not ln.startswith(_RC):
            said.append(ln.strip())
    for ln in said:
        if re.search(r"(?i)invalid|unknown|bad|error|not|cannot|can't|illegal|must|too|unsupported|wrong", ln):
            return ln
    return said[-1] if said else "(mkfs said nothing)"


def _tool_id(v: FsVariant) -> str:
    tool = v.fs.mkfs[0]
    path = shutil.which(tool, path="/usr/sbin:/usr/bin:/sbin:/bin")
    if not path:
        return tool
    st = os.stat(path)
    return f"{path}:{st.st_size}:{int(st.st_mtime)}"


def _cache_file(v: FsVariant, kernel_key: str) -> Path:
    key = json.dumps([v.spec, v.mkfs_extra, v.mount_extra, kernel_key, _tool_id(v)])
    return cache_dir() / "option-trials" / f"{hashlib.sha256(key.encode()).hexdigest()[:20]}.json"


def check(variants: Iterable[FsVariant], kernels: Iterable[str]) -> list[Trial]:
    """Every variant with options of its own, tried on each lab kernel; one line (FlashbedError)
    for the first refusal. Returns the trials (the accepted ones)."""
    from .lab.kernel import lab_kernel
    from .lab.labs import UmlLab
    todo = {v.spec: v for v in variants if v.given and v.base.media == "block"}
    if not todo:
        return []
    out: list[Trial] = []
    for label in kernels:
        info = lab_kernel(label)  # the build a one-vCPU cell boots: no SMP build for a trial
        cached, missing = [], []
        for v in todo.values():
            f = _cache_file(v, info.key)
            if f.exists():
                cached.append(Trial(**json.loads(f.read_text())))
            else:
                missing.append(v)
        if missing:
            fscat.check_host_tools(list(dict.fromkeys(v.base.name for v in missing)))
            fresh = _boot(missing, UmlLab(info), label)
            for v, t in zip(missing, fresh):
                f = _cache_file(v, info.key)
                f.parent.mkdir(parents=True, exist_ok=True)
                tmp = f.with_suffix(".tmp")
                tmp.write_text(json.dumps(asdict(t)))
                os.replace(tmp, f)
            cached += fresh
        for t in cached:
            if not t.ok:
                raise FlashbedError(t.line())
        out += cached
    return out


def _boot(variants: list[FsVariant], lab, label: str) -> list[Trial]:
    size = max([MIN_DEVICE, *(v.min_size for v in variants)])
    with tempfile.TemporaryDirectory(prefix="flashbed-trial-") as d:
        run_dir = Path(d)
        img = run_dir / "device.img"
        with open(img, "wb") as f:
            f.truncate(size)
        res = lab.boot(BootSpec(run_dir=run_dir, steps=tuple(trial_steps(variants)), disks=(BlockDevice(img),),
                                timeout=120 + 60 * len(variants)))
        if not res.steps and not res.ok:
            raise FlashbedError(f"the options' trial boot on lab kernel {label} failed ({res.status}: "
                                f"{res.error or 'no step ran'}): see `flashbed lab smoke`")
        return [judge(v, label, (res.step(f"mkfs{i}"), res.step(f"mount{i}"))) for i, v in enumerate(variants)]
