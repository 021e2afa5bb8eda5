"""A board's power switch: `--power-cmd 'CMD {action}'`, a command template in the style
of labgrid's ExternalPowerDriver. flashbed puts `on`, `off` or `cycle` in place of
`{action}` and runs the command on this machine with sh (a relay, a PDU's client, a
USB hub's port power: whatever switches the board).

The powercut study on a board: at the seeded moment `off`, the boot ends with the
board; after OFF_HOLD seconds `on`, and SSH is retried until the board answers
(BOOT_WAIT seconds, or run's --boot-wait); a board that does not answer is power-cycled
(`cycle`) once and waited for as long again, then the cell stops with one line.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from enum import StrEnum

from ..errors import FlashbedError

PLACEHOLDER = "{action}"
OFF_HOLD = 2.0  # seconds the board stays off (its capacitors drain, as a real cut leaves it)
BOOT_WAIT = 300.0  # seconds a board may take to boot and answer SSH after `on` (run --boot-wait sets it)
COMMAND_TIMEOUT = 60.0  # seconds one power command may take


class Action(StrEnum):
    ON = "on"
    OFF = "off"
    CYCLE = "cycle"


@dataclass(frozen=True)
class PowerCommand:
    template: str

    def command(self, action: Action) -> str:
        return self.template.replace(PLACEHOLDER, action.value)

    def run(self, action: Action) -> float:
        """Run the command for `action`; its seconds. One line if it fails."""
        import time
        cmd = self.command(action)
        started = time.monotonic()
        try:
            r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                               timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise FlashbedError(f"--power-cmd: '{cmd}' did not finish within {COMMAND_TIMEOUT:.0f}s") from None
        if r.returncode != 0:
            err = (r.stderr or r.stdout).strip().splitlines()
            raise FlashbedError(f"--power-cmd: '{cmd}' failed (exit {r.returncode}): "
                                f"{err[-1] if err else 'no message'}")
        return time.monotonic() - started


def parse_power_cmd(text: str) -> PowerCommand:
    """The --power-cmd template, checked: one line if it is not one."""
    if not text.strip():
        raise FlashbedError("--power-cmd is empty: give a command with {action}, e.g. --power-cmd "
                            "'pdu-switch outlet 3 {action}' (flashbed puts on, off or cycle there)")
    if PLACEHOLDER not in text:
        raise FlashbedError(f"--power-cmd '{text}' has no {PLACEHOLDER}: write where on, off or cycle goes, e.g. "
                            f"--power-cmd '{text} {PLACEHOLDER}'")
    return PowerCommand(text)
