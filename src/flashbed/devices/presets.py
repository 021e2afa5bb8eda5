"""Device presets: one TOML file per device in presets/.

Block presets (eMMC, SD, USB stick, ideal) are served by flashbed-emu, which
also parses and validates them: their geometry comes from `flashbed-emu
describe`, so the Python side never re-implements the emulator's rules. Raw
NAND presets (`kind = "nandsim"`) are the kernel's nandsim in the lab; they are
read here.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FlashbedError
from ..paths import repo_root
from ..sizes import format_size, parse_size
from .nandsim import NandTiming, parse_timing

DEFAULT_DEVICE = "emmc-8g"
VARIANT_MARK = "~"  # a variant's label: its preset's, this, its name (emmc-8g@512M~slc_cache-low)


def presets_dir() -> Path:
    return repo_root() / "presets"


@dataclass(frozen=True)
class SlcBuffer:
    """An SLC-mode write buffer in front of the MLC/TLC array (page FTL):
    host data lands there, and is folded into the array when the device has
    been idle `idle_ms`, or in the foreground when the buffer is full. A
    sequential stream longer than `bypass` bytes (0: none) goes straight to
    the array."""

    bytes: int
    program_us: float  # page program time in SLC mode
    idle_ms: float
    bypass: int = 0


@dataclass(frozen=True)
class Device:
    """A device preset at a given capacity, with the geometry studies need."""

    name: str  # preset name
    path: Path
    kind: str  # "block" (flashbed-emu, a plain file, a real device) | "nandsim" (raw NAND in the lab)
    capacity: int
    page_size: int
    erase_block: int  # erase block (page FTL) or allocation unit (hybrid FTL); 0: unknown (a real device)
    preset_capacity: int
    info: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # a variant of the preset (robust.py): its name, and the fields it sets on top of the file's
    # (path, TOML value) for the emulator (`flashbed-emu --set`)
    variant: str = ""
    sets: tuple[tuple[str, str], ...] = ()
    # what the preset's values rest on (devices/assumptions.py; block presets)
    footing: Any = field(default=None, compare=False, hash=False)

    @property
    def label(self) -> str:
        base = self.name if self.capacity == self.preset_capacity else f"{self.name}@{format_size(self.capacity)}"
        return f"{base}{VARIANT_MARK}{self.variant}" if self.variant else base

    @property
    def emulated(self) -> bool:
        """Served by flashbed-emu (not a plain file, not nandsim)."""
        return self.backend == "emulator"

    @property
    def backend(self) -> str:
        """What serves it to the lab (devices/session.py has a session class per backend)."""
        if self.kind == "nandsim":
            return "nandsim"
        kind = self.info.get("kind")
        return kind if kind in ("file", "real", "board") else "emulator"

    @property
    def nandsim_id_bytes(self) -> tuple[int, ...]:
        return tuple(self.info["nandsim"]["id_bytes"])

    @property
    def part(self) -> dict[str, str]:
        """The real device this preset is a twin of ([part]: model, capacity, interface...)."""
        return dict(self.info.get("part") or {})

    @property
    def published(self) -> dict[str, Any]:
        """The rates the preset reproduces, with their method, span and sources
        ([published]); zero for a figure nobody published."""
        return dict(self.info.get("declared") or {})

    @property
    def slc_buffer(self) -> SlcBuffer | None:
        """The SLC-mode write buffer, if the preset has one (`ftl.slc_cache`)."""
        n = int(self.info.get("slc_cache_bytes") or 0)
        if not n:
            return None
        return SlcBuffer(bytes=n, program_us=float(self.info["slc_program_us"]), idle_ms=float(self.info["slc_idle_ms"]),
                         bypass=int(self.info.get("slc_bypass_bytes") or 0))

    @property
    def nand_timing(self) -> NandTiming | None:
        """Datasheet timings of a raw NAND preset (None: nandsim runs without delays)."""
        t = self.info.get("timing")
        return NandTiming(**t) if t else None


def available() -> list[str]:
    return sorted(p.stem for p in presets_dir().glob("*.toml"))


# Presets that were renamed when they became twins of named parts: the old
# name says which one to use now.
RENAMED: dict[str, str] = {
    "sd-class10": "use lexar-c10-16g (a calibrated log-block microSD card: 4 MiB AU, 5 open AUs); the old "
                  "two-open-AU card reproduced no named part",
    "usb-stick": "use stick-1au-inorder (the same worst-case model: one open AU, in-order appends only) or "
                 "sandisk-ultra-fit-32g (a calibrated mainstream USB 2.0 stick)",
}


def is_file_spec(name: str) -> bool:
    """A preset file of the user's own ('./mypart.toml'), not a name under presets/."""
    return "/" in name or name.endswith(".toml")


def preset_path(name: str) -> Path:
    if is_file_spec(name):
        p = Path(name)
        if p.is_dir():
            raise FlashbedError(f"preset file {name} is a directory: give a preset file (e.g. ./mypart.toml)")
        if p.is_block_device():
            raise FlashbedError(f"{name} is a block device, not a preset file: `flashbed run --device {name}` runs "
                                f"on a real device; here give a preset name or file")
        if not p.exists():
            raise FlashbedError(f"preset file {name} does not exist")
        if not p.is_file():
            raise FlashbedError(f"preset file {name} is not a regular file: give a preset file (e.g. ./mypart.toml)")
        return p.resolve()
    p = presets_dir() / f"{name}.toml"
    if not p.exists():
        if name in RENAMED:
            raise FlashbedError(f"device preset '{name}' was renamed: {RENAMED[name]}")
        raise FlashbedError(f"unknown device preset '{name}': choose from {', '.join(available())}, "
                            "or give a preset file (./mypart.toml)")
    return p


def absolute_spec(spec: str) -> str:
    """A preset file's spec with an absolute path (a run resumed from another
    directory finds it again); preset names unchanged."""
    name, at, size = spec.rpartition("@") if "@" in spec else (spec, "", "")
    return str(Path(name).resolve()) + at + size if is_file_spec(name) else spec


def load_spec(spec: str) -> Device:
    """'emmc-8g', 'emmc-8g@512M' (a capacity other than the preset's), or a
    preset file of one's own, './mypart.toml[@SIZE]'."""
    name, at, size = spec.rpartition("@") if "@" in spec else (spec, "", "")
    if at and not size.strip():
        raise FlashbedError(f"device {spec}: nothing after '@': give a size, e.g. {name}@512M, or drop the '@' "
                            f"for the preset's own capacity")
    if at and not name:
        raise FlashbedError(f"device {spec}: no preset before '@': give one, e.g. emmc-8g{spec}")
    return load(name, parse_size(size) if size else None)


def load(name: str, capacity: int | None = None, variant: str = "",
         sets: tuple[tuple[str, str], ...] = ()) -> Device:
    """Preset `name` at `capacity`; a variant of it: `variant` names it, `sets` are its fields
    (a block preset's; see robust.py)."""
    path = preset_path(name)
    if is_file_spec(name):
        name = path.stem  # labels name cells and files: no directories in them
    try:
        data = tomllib.loads(path.read_text())
    except UnicodeDecodeError:
        raise FlashbedError(f"{path}: not a preset file (not text): give a TOML preset file") from None
    except OSError as e:
        raise FlashbedError(f"{path}: cannot read it: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise FlashbedError(f"{path}: not valid TOML: {e}") from None
    if data.get("kind") == "nandsim":
        return _nandsim(name, path, data, capacity)
    if data.get("kind") == "file":
        return _plain_file(name, path, data, capacity)
    from . import emulator  # block presets: the emulator is the authority
    from .assumptions import check_limits, load_footing

    info = emulator.describe(path, capacity, sets)  # the model's values first: its checks are the authority
    own = info if capacity is None and not sets else emulator.describe(path, None)
    footing = load_footing(path, data)
    if not sets:  # a variant's values come from these ranges, checked with its preset
        check_limits(path, path.read_text(), footing, emulator.describe)
    info["footing"] = footing.describe()
    return Device(name=name, path=path, kind="block", capacity=int(info["capacity_bytes"]),
                  page_size=int(info["page_size"]), erase_block=int(info["erase_block_bytes"]),
                  preset_capacity=int(own["capacity_bytes"]), info=info, variant=variant, sets=sets,
                  footing=footing)


# The fields of the presets read here (block presets: the emulator checks its own), checked as
# strictly as the emulator checks those: an unknown or misspelt key, a wrong type or an
# impossible geometry is one line, never a silent default.
TOP_FIELDS = ("name", "kind", "description")
GEOMETRY = ("capacity_bytes", "page_size", "erase_block_bytes")
FILE_TABLES: dict[str, tuple[str, ...]] = {"geometry": GEOMETRY}
NANDSIM_TABLES: dict[str, tuple[str, ...]] = {
    "geometry": (*GEOMETRY, "oob_size", "cell"), "nandsim": ("id_bytes",), "ubi": ("vid_hdr_offset",),
    "part": (), "timing": ()}  # () : any key ([part] is free text; [timing] is checked by parse_timing)
CELLS = ("slc", "mlc", "tlc")


def _check_fields(path: Path, data: dict, tables: dict[str, tuple[str, ...]]) -> None:
    known = [*TOP_FIELDS, *tables]
    for key, v in data.items():
        if key not in known:
            raise FlashbedError(f"{path}: field {key}: unknown field (known: {', '.join(known)})")
        if key in tables:
            if not isinstance(v, dict):
                raise FlashbedError(f"{path}: [{key}] must be a table")
            fields = tables[key]
            for k in v:
                if fields and k not in fields:
                    raise FlashbedError(f"{path}: field [{key}].{k}: unknown field (known: {', '.join(fields)})")
        elif not isinstance(v, str):
            raise FlashbedError(f"{path}: field {key}: must be a string")


def _need(path: Path, data: dict, table: str, key: str) -> Any:
    try:
        return data[table][key]
    except KeyError:
        raise FlashbedError(f"{path}: missing field [{table}].{key}") from None


def _count(path: Path, table: str, key: str, v: Any, low: int = 1) -> int:
    """A whole number field of at least `low`."""
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise FlashbedError(f"{path}: field [{table}].{key}: must be a whole number of at least {low}, not {v!r}")
    return v


def _geometry(path: Path, data: dict) -> tuple[int, int, int]:
    """(capacity, page, erase block) of [geometry], checked: each positive, the erase block
    a whole number of pages, the capacity a whole number of erase blocks."""
    cap, page, eb = (_count(path, "geometry", k, _need(path, data, "geometry", k)) for k in GEOMETRY)
    if eb % page:
        raise FlashbedError(f"{path}: [geometry].erase_block_bytes ({eb}) must be a whole number of pages "
                            f"({page} bytes)")
    if cap % eb:
        raise FlashbedError(f"{path}: [geometry].capacity_bytes ({cap}) must be a whole number of erase blocks "
                            f"({format_size(eb)})")
    return cap, page, eb


def _plain_file(name: str, path: Path, data: dict, capacity: int | None) -> Device:
    _check_fields(path, data, FILE_TABLES)
    own, page, eb = _geometry(path, data)
    cap = capacity or own
    info = {"name": name, "kind": "file", "capacity_bytes": cap, "description": data.get("description", ""),
            "page_size": page, "erase_block_bytes": eb}
    return Device(name=name, path=path, kind="block", capacity=cap, page_size=info["page_size"],
                  erase_block=info["erase_block_bytes"], preset_capacity=own, info=info)


def _nandsim(name: str, path: Path, data: dict, capacity: int | None) -> Device:
    _check_fields(path, data, NANDSIM_TABLES)
    ids = _need(path, data, "nandsim", "id_bytes")
    if not (isinstance(ids, list) and 2 <= len(ids) <= 8 and all(isinstance(b, int) and 0 <= b < 256 for b in ids)):
        raise FlashbedError(f"{path}: [nandsim].id_bytes must be 2 to 8 byte values")
    chip, page, eb = _geometry(path, data)
    geo = data["geometry"]
    if "oob_size" in geo:
        _count(path, "geometry", "oob_size", geo["oob_size"], low=0)
    if geo.get("cell", "slc") not in CELLS:
        raise FlashbedError(f"{path}: field [geometry].cell: must be one of {', '.join(CELLS)}")
    if "vid_hdr_offset" in (data.get("ubi") or {}):
        vid = _count(path, "ubi", "vid_hdr_offset", data["ubi"]["vid_hdr_offset"], low=0)
        if vid >= eb:
            raise FlashbedError(f"{path}: [ubi].vid_hdr_offset ({vid}) must lie inside an erase block ({eb})")
    cap = chip if capacity is None else capacity
    if cap % eb or not (0 < cap <= chip):
        raise FlashbedError(f"device {name}: capacity {format_size(cap)} must be a multiple of the "
                            f"{format_size(eb)} erase block and at most the chip's {format_size(chip)}: e.g. "
                            f"{name}@{format_size(max(eb, min(chip, cap - cap % eb)))}")
    timing = parse_timing(path, data.get("timing"))
    info = {"name": name, "kind": "nandsim", "capacity_bytes": cap, "page_size": page,
            "erase_block_bytes": eb, "chip_bytes": chip, "cell": data["geometry"].get("cell", ""),
            "description": data.get("description", ""), "nandsim": dict(data["nandsim"]),
            "ubi": dict(data.get("ubi", {})), "timing": asdict(timing) if timing else None,
            "part": {k: str(v) for k, v in (data.get("part") or {}).items()}}
    return Device(name=name, path=path, kind="nandsim", capacity=cap, page_size=page, erase_block=eb,
                  preset_capacity=chip, info=info)
