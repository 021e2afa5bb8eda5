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
"""

from __future__ import annotations

import enum

from ..errors import FlashbedError


class Clock(str, enum.Enum):
    REAL = "real"
    VIRTUAL = "virtual"

    @property
    def time_travel(self) -> bool:
        return self is Clock.VIRTUAL


DEFAULT = Clock.REAL


def parse(text: str | None) -> Clock:
    """`real` or `virtual`; one clear line on anything else."""
    if text is None or text == "":
        return DEFAULT
    try:
        return Clock(text.strip())
    except ValueError:
        raise FlashbedError(f"--clock '{text}' must be real or virtual") from None


def labels(texts: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Clocks as given, each once, in order; one clear line on a bad one."""
    return tuple(dict.fromkeys(parse(t).value for t in texts))


def effective(clock: Clock, backend: str) -> tuple[Clock, str]:
    """The clock a device of `backend` runs on, and a one-line note when that is not
    the one asked for (nandsim and real devices have no model clock)."""
    if clock is Clock.VIRTUAL and backend != "emulator":
        return Clock.REAL, (f"a {backend} device runs in real time: --clock virtual applies to devices "
                            f"the emulator serves")
    return clock, ""


def pace(clock: Clock, pace: str) -> str:
    """The emulator's --pace for a lab clock (virtual time replaces real pacing)."""
    return "virtual" if clock is Clock.VIRTUAL else pace
