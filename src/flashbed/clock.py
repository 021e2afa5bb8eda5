"""The lab's clock: real time, or virtual time set by the device (issue 17).

real     the lab kernel runs on the host's clock; an emulated device paces each
         request in wall-clock time (the emulator's --pace real), so the lab's own
         CPU cost (a UML syscall is ~10-17 us) is part of every timed figure.
virtual  the time-travel flavour of the lab kernel (`time-travel=inf-cpu`): guest
         time moves only when the kernel moves it, guest CPU work costs no guest
         time, and each block request completes at the guest time the emulator's
         model says (ubd 'v', lab patch 0006; the emulator's --pace virtual). A
         timed figure is then the device's, whatever the host's load.

Only a device the emulator serves runs in virtual time: nandsim and real devices
run on the real-time kernel (`effective`).

`flashbed run` asks for one of these per cell, or `auto` (its default): each cell in
virtual time where it can run there, in real time where it cannot (`RealWhy`).

A cell's clock is a Clock from the plan to where it acts: the lab factory picks the
kernel's flavour by it, the device session serves the device in it. In real time an
emulated device also has a Pace: its modelled delays waited out, or skipped. Only the
emulator's own command line says "virtual" as a pace (`emulator_pace`).
"""

from __future__ import annotations

import enum
from typing import Any

from .errors import FlashbedError


class Clock(enum.StrEnum):
    REAL = "real"
    VIRTUAL = "virtual"

    @property
    def time_travel(self) -> bool:
        return self is Clock.VIRTUAL


DEFAULT = Clock.REAL


class Pace(enum.StrEnum):
    """An emulated device's pace in real time: its modelled delays waited out, or skipped
    (its timings then mean nothing; the failure studies' outcomes do not depend on them)."""

    REAL = "real"
    NONE = "none"

# `flashbed run`'s request: virtual time for each cell that can run in it, real time for
# the rest (RealWhy); a request's () is real time (runs from before auto kept their ids)
AUTO = "auto"
RUN_DEFAULT = (AUTO,)


class RealWhy(str, enum.Enum):
    """Why a cell runs in real time although its run asked for virtual time or auto."""

    DEVICE = "device"  # nandsim or a real device: no model clock to run on
    KERNEL = "kernel"  # a lab kernel without a time-travel flavour (auto only; virtual refuses)
    SMP = "smp"  # more than one vCPU: the time-travel kernel is uniprocessor (auto only)
    CPU_TIME = "cpu-time"  # the study measures the lab's real CPU time (Study.real_cpu_time)


def parse(text: str | None) -> Clock:
    """`real` or `virtual`; one clear line on anything else."""
    if text is None or text == "":
        return DEFAULT
    try:
        return Clock(text.strip())
    except ValueError:
        raise FlashbedError(f"--clock '{text}' must be real or virtual") from None


def labels(texts: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`flashbed run`'s clocks as given, each once, in order (none given: auto); one clear
    line on a bad one, or on auto beside another (it already picks per cell)."""
    out = tuple(dict.fromkeys(t.strip() for t in texts)) or RUN_DEFAULT
    for t in out:
        if t not in (AUTO, *(c.value for c in Clock)):
            raise FlashbedError(f"--clock '{t}' must be auto (the default: virtual time where a cell can run "
                                f"in it), real or virtual")
    if AUTO in out and len(out) > 1:
        raise FlashbedError(f"--clock {','.join(out)}: auto already picks real or virtual per cell: give it "
                            f"alone, or real,virtual for cells of each")
    return out


def effective(clock: Clock, backend: str) -> tuple[Clock, str]:
    """The clock a device of `backend` runs on, and a one-line note when that is not
    the one asked for (nandsim and real devices have no model clock)."""
    if clock is Clock.VIRTUAL and backend != "emulator":
        return Clock.REAL, (f"a {backend} device runs in real time: --clock virtual applies to devices "
                            f"the emulator serves")
    return clock, ""


def emulator_pace(clock: Clock, pace: Pace) -> str:
    """The emulator's --pace for a cell (flashbed-emu's own word, and what a cell records it ran
    at): virtual time replaces real pacing."""
    return "virtual" if clock is Clock.VIRTUAL else Pace(pace).value


def from_emulator_pace(word: Any) -> tuple[Clock, Pace]:
    """A cell's clock and pace from the emulator's --pace its result records (emulator_pace's
    inverse; in virtual time the real-time pace is not recorded: real; nothing recorded: none)."""
    if word == "virtual":
        return Clock.VIRTUAL, Pace.REAL
    return Clock.REAL, Pace(word) if word in tuple(Pace) else Pace.NONE


def recorded(value: Any) -> Clock | None:
    """The clock a result or a file records (its value); None where it records none (runs from
    before the clock axis) or one this flashbed does not know."""
    try:
        return Clock(value) if value else None
    except ValueError:
        return None
