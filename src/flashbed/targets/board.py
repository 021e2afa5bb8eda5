"""A board over SSH as a Target (`--target ssh://USER@HOST[:PORT]`): the board's own kernel,
CPUs, time and device (lab/board.py: the connection, its lab and sessions), one cell at a
time. What a board cannot do is refused here, one line each: vCPUs, --pace none, --kernel,
--clock virtual, a device that is no block device of the board's, raw NAND, a filesystem its
kernel or tools lack, and powercut without --power-cmd (crashstates: its device has no write
log, which the plan refuses as for any such device)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..clock import Clock
from ..devices.presets import Device
from ..errors import FlashbedError
from ..probe.lab import ProbeSite
from .base import ItsOwnLab, Target

# a run's and a probe's words for what goes in the lab instead
_IN_THE_LAB = {"run": "presets run in the lab, without --target", "probe": "presets are probed in the lab, without --target"}


@dataclass
class BoardTarget(Target):
    ssh: Any = None  # lab.ssh.SshAddress
    power: Any = None  # lab.power.PowerCommand: the board's power switch (--power-cmd)
    boot_wait: float | None = None  # --boot-wait: seconds from the switch's on until SSH answers (None: BOOT_WAIT)
    board: Any = None  # lab.board.Board, connected on entry
    studies: tuple[str, ...] = ()  # the run's (check): their tools are looked for on the board once it is reached
    flashbench: str = ""  # how the board runs flashbench (probe_device)

    @classmethod
    def url(cls, text: str, options: Any) -> str:
        from ..lab.ssh import parse_address
        return parse_address(text, options.ssh_key or "", options.ssh_config or "").url

    @classmethod
    def open(cls, request, options: Any, store, executor) -> "BoardTarget":
        """A run's board (connected on entry): one cell at a time, every cell writes its one device."""
        from ..executors import DaskExecutor, LocalExecutor
        from ..lab.power import parse_power_cmd
        from ..lab.ssh import parse_address
        if isinstance(executor, DaskExecutor):
            raise FlashbedError("a board is reached from this machine, not from Dask workers: run it with the local "
                                "executor")
        power = parse_power_cmd(options.power_cmd) if options.power_cmd is not None else None
        return cls(executor=LocalExecutor(1), ssh=parse_address(request.target, options.ssh_key or "",
                                                                options.ssh_config or ""), power=power,
                   boot_wait=getattr(options, "boot_wait", None))

    @classmethod
    def for_probe(cls, options: Any) -> "BoardTarget":
        """A probe's board: its device named as the board's, checked before the board is reached."""
        from ..lab.ssh import parse_address
        ssh = parse_address(options.target, options.ssh_key or "", options.ssh_config or "")
        _board_devices(ssh.url, (options.device,), tuple(options.destroy_data_on), "probe")
        return cls(ssh=ssh)

    def __enter__(self) -> "BoardTarget":
        from ..lab.board import Board
        from ..lab.power import BOOT_WAIT
        self.board = Board(self.ssh, self.power, BOOT_WAIT if self.boot_wait is None else self.boot_wait).open()
        return self

    def close(self) -> None:
        if self.board is not None:
            self.board.close()
            self.board = None

    def check(self, request, destroy_data_on: tuple[str, ...]) -> None:
        if request.cpus != 1:
            raise FlashbedError("--cpus sets the lab's vCPUs; a board runs on its own CPUs: drop --cpus")
        if request.pace == "none":
            raise FlashbedError("--pace none skips an emulated device's delays; a board's device keeps its own "
                                "time: drop --pace")
        if request.kernels:
            raise FlashbedError("--kernel picks a lab kernel; a board runs its own: drop --kernel")
        _board_devices(request.target, request.devices, destroy_data_on, "run")
        self.studies = tuple(request.studies)

    def choices(self, request) -> list[ItsOwnLab]:
        return [ItsOwnLab("board", "a board runs the steps on its own CPUs: flashbed gives it no vCPUs")]

    def check_virtual(self, request, choices) -> None:
        raise FlashbedError("--clock virtual is the lab's: a board keeps its own time: drop --clock")

    def load_devices(self, specs: tuple[str, ...], destroy_data_on: tuple[str, ...]) -> dict[str, Device]:
        return {d.label: d for d in (self.board.load_device(n, destroy_data_on) for n in specs)}

    def check_variant(self, spec: str, variant) -> None:
        if variant.media == "mtd":
            raise FlashbedError(f"{spec} runs on raw NAND, and flashbed does not drive a board's raw NAND (/dev/mtdN) "
                                f"yet: run {spec} on a raw NAND preset in the lab (e.g. --device nand-2g-4k@128M), "
                                f"or drop it")
        lacks = self.board.lacking({variant.base.fstype})
        if lacks:
            raise FlashbedError(f"{spec}: {lacks}")
        self._study_tools()

    def _study_tools(self) -> None:
        """The tools the run's studies drive themselves (sqlite3 for sqlite), looked for on the board: a
        board without one was found only by its cells failing (`sqlite3: not found`)."""
        from ..studies import STUDIES
        need = {t: s for s in self.studies if s in STUDIES for t in STUDIES[s].tools}
        for tool in self.board.missing(sorted(need)):
            raise FlashbedError(f"study {need[tool]} runs {tool}, and {self.ssh.url} has none: install it on the "
                                f"board (Debian: apt install {tool}), or drop {need[tool]}")

    def session_class(self, device: Device) -> type:
        from ..lab.board import session_for
        return session_for(device)

    def no_power_switch(self, study: str, device: Device) -> str:
        return (f"study {study} cuts the device's power: give the board's power switch with --power-cmd "
                f"'CMD {{action}}' (flashbed runs it with on, off or cycle), or drop {study}")

    def labs(self, plan, store, say: Callable[[str], None]):
        from ..lab.board import BoardLabs
        return BoardLabs(self.board)

    def probe_device(self, spec: str, destroy_data_on: tuple[str, ...]) -> Device:
        device = self.board.load_device(spec, destroy_data_on)
        if "fio" in self.board.identity.get("missing_tools", ()):
            raise FlashbedError(f"{self.ssh.url} has no fio: the probe's rates are fio jobs (Debian: apt install fio)")
        self.flashbench = self.board.flashbench()  # its own, or this machine's copied over (or one line)
        return device

    def probe_site(self, device: Device, clock: Clock) -> ProbeSite:
        """flashbench and fio natively on the board's device: no lab between them and it."""
        from ..lab.board import BoardLab
        from ..probe.lab import tool_versions
        site = ProbeSite(lab=BoardLab(self.board, str(device.path)), flashbench=self.flashbench,
                         tools=self.board.versions("flashbench", "fio"), clock=Clock.REAL, kernel_of="board")
        if site.flashbench != "flashbench":
            site.tools["flashbench"] = tool_versions()["flashbench"] + " (this machine's, copied to the board)"
        return site


def _board_devices(url: str, specs: tuple[str, ...], destroy_data_on: tuple[str, ...], what: str) -> None:
    """The board's devices are its block devices by their node; --destroy-data-on names one of them."""
    if not specs or any(not d.startswith("/dev/") for d in specs):
        raise FlashbedError(f"--target {url}: give the board's device with --device /dev/... (e.g. "
                            f"/dev/mmcblk0p3); {_IN_THE_LAB[what]}")
    for path in destroy_data_on:  # a typo must not pass for permission
        if path not in specs:
            raise FlashbedError(f"--destroy-data-on {path} names no device of this {what} on the board "
                                f"({', '.join(specs)}): repeat the --device path exactly")
