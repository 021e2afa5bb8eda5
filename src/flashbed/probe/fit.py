"""A preset fitted to a probe: geometry from flashbench, timings from the rates.

What a probe cannot see (cell type, planes, tR, NAND bus) is taken from the
MLC datasheet class the shipped presets use and said so; what it can see is
solved from the emulator's own cost model (see flash-model device.rs, ftl/):

- all from the device's own figures (ProbeResult.device_figures: median
  request latencies, the lab's own time per request taken out);
- host interface rate = the sequential read rate (cards and sticks read at
  their bus speed);
- average tPROG from the sequential write rate: planes x page / tPROG;
- firmware time per read command from the random 4 KiB read latency, minus
  tR, the page's NAND-bus transfer and the 4 KiB host transfer;
- firmware time per write command likewise from the random 4 KiB write
  latency inside one AU;
- hybrid FTL with the open-AU count when small writes collapse past it,
  page-mapped when they never do; in-order appends only (a backward write
  closes the AU) when random writes inside one AU are merges too.

The fit is first order: re-probe the written preset to check it, and
`flashbed bench presets --device FILE` suggests corrected firmware times.

The written preset says what each value rests on (devices/assumptions.py): [measured] for what the
probe saw, [fitted] for what is solved from its rates, [assumptions] with the datasheet classes'
ranges for what it cannot see (the cache, the planes, the NAND bus, tR): `flashbed run --robust`
varies those.
"""

from __future__ import annotations

from ..devices.presets import Device
from ..sizes import format_size
from .lab import ProbeResult

# the MLC datasheet class of the shipped presets (2x-nm MLC: tR 50-75 us,
# tPROG lower/upper ~0.6/2.4 ms, tBERS 3-5 ms): not observable from outside
CELL = "mlc"
READ_US = 60.0
PROGRAM_SPLIT = (0.4, 1.6)  # lower / upper page share of the average tPROG
ERASE_US = 3000.0
BUS_MB_S = 100.0
PLANES = 2
DEFAULT_PAGE = 16384
CACHE = "64K"
IN_ORDER = 10  # an in-AU random write this many times slower than an append is a merge
KiB4 = 4096


def _us(nbytes: float, mb_s: float) -> float:
    return nbytes / mb_s if mb_s > 0 else 0.0  # bytes / (MB/s) = µs


def preset_toml(result: ProbeResult, device: Device, name: str) -> str:
    r, g, o = result.figures(), result.geometry, result.open_aus
    when = f"probed {result.when} with flashbench {result.tools['flashbench']} and fio {result.tools['fio']} " \
           f"in {result.kernel_words} on {result.device}"
    page = g.page if g.page and g.page <= result.erase_unit_used // (2 * PLANES) else DEFAULT_PAGE
    page_note = "probed: flashbench -a page step" if g.page == page else \
        f"no page step seen by flashbench -a: {format_size(DEFAULT_PAGE)} assumed (MLC datasheet class)"
    eu = result.erase_unit_used
    eu_note = "probed: flashbench -a erase-unit step" if g.erase_unit else \
        "no erase-unit step seen by flashbench -a: flashbench's default 4 MiB assumed"
    ppb = max(2, eu // (page * PLANES))
    own = result.device_figures()  # from median latencies, the lab's own time out of the random ones
    host = own["seq_read_mb_s"]
    xfer_page = _us(page, BUS_MB_S)
    # planes program in parallel; each page first crosses the shared NAND bus
    tprog = max(50.0, PLANES * page / max(own["seq_write_mb_s"], 0.01) - xfer_page)
    lower, upper = (round(tprog * f) for f in PROGRAM_SPLIT)
    # the device's own figures: the lab's path is in every measured latency
    # and will be again when the fitted preset is run
    read_ovh = max(0.0, 1e6 / max(own["rand_read_4k_iops"], 1e-3) - READ_US - xfer_page - _us(KiB4, host))
    # the in-AU write rate by the rule of every other figure (device_figures): from the median, or from the
    # mean where the latencies are heavy-tailed. From the median alone, the emulated board's card (0.38 ms
    # median, 8.2 ms mean) was fitted to 2639 IOPS where the probe measured 122.6
    w_au = min(result.device_figures("au")["rand_write_4k_iops"], 1e6)
    hybrid = o.collapsed_at is not None and o.count is not None
    if hybrid:
        # a 4 KiB write of a page-mapped-within-the-AU log: read the page, program it
        base = READ_US + 2 * xfer_page + tprog + _us(KiB4, host)
    else:
        # a cached 4 KiB unit; the page is programmed once per page of units
        base = _us(KiB4, host) + tprog / (PLANES * page / KiB4)
    # random writes inside one open AU far slower than a log append: the AU
    # takes pages in order only, each backward write a merge (the cheapest sticks)
    in_order = hybrid and 1e6 / max(w_au, 1e-3) > IN_ORDER * base
    write_ovh = 0.0 if in_order else max(0.0, 1e6 / max(w_au, 1e-3) - base)
    cap = device.capacity
    lab_out = ", the lab's own time out" if result.lab_us else ""  # a board's probe has no lab to take out
    lines = [
        f"# {name}: fitted by `flashbed probe` to what it measured on {result.device}.",
        f"# {when}.",
        "# Geometry from flashbench (-a, -O); timings solved from the fio rates with the",
        "# emulator's cost model (flashbed/probe/fit.py); what a probe cannot see is the MLC",
        "# datasheet class of the shipped presets and says so. Re-probe this file to check it.",
        f'name = "{name}"',
        'kind = "block"',
        f'description = "fitted to a probe of {result.device} on {result.when[:10]}"',
        "",
        "[nand]",
        f'cell = "{CELL}"                # not observable: MLC datasheet class assumed',
        f"page_size = {page}         # {page_note}",
        f"pages_per_block = {ppb}      # erase unit {format_size(eu)} = pages x page x planes ({eu_note})",
        f"planes = {PLANES}                   # not observable: two planes assumed",
        "endurance = 3000             # not observable: MLC datasheet class",
        "protect_paired_pages = false # not observable: an MLC part without power-loss protection assumed (a cut "
        "upper-page program damages its lower page: data made durable before the cut can read back as EIO)",
        "",
        "[nand.timing]",
        f"read_us = {READ_US:g}                # not observable: tR of the MLC datasheet class",
        f"program_us = [{lower}, {upper}]   # fitted: average tPROG {tprog:.0f} us gives the probed "
        f"{own['seq_write_mb_s']:.2f} MB/s sequential write (1 MiB / median request time; {result.when})",
        f"erase_us = {ERASE_US:g}              # not observable: tBERS of the MLC datasheet class",
        f"bus_mb_s = {BUS_MB_S:g}              # not observable: single-channel controller assumed",
        "",
        "[ftl]",
        f'type = "{"hybrid" if hybrid else "page"}"' + (
            f"              # probed: small writes collapse past {o.count} AUs (flashbench -O)" if hybrid else
            f"                # probed: no collapse up to {o.tried} AUs written round-robin (flashbench -O)"),
        f'capacity = "{format_size(cap)}"',
    ]
    if hybrid:
        lines.append(f"open_aus = {o.count}                # probed: flashbench -O, {result.when}")
    if in_order:
        lines.append(f"sequential_log = true         # probed: random 4 KiB writes in one AU run at {w_au:.1f} IOPS, "
                     "merges, not appends: the AU takes pages in order only")
    else:
        lines += ["map_unit = 4096               # not observable: 4 KiB mapping assumed",
                  "over_provisioning = 0.07     # not observable"]
    lines.append(f'cache = "{CACHE}"                # not observable: a small controller write buffer assumed '
                 "(the random-write fit counts writes as buffered)")
    lines += [
        f"host_mb_s = {host:.2f}          # probed: sequential read {host:.2f} MB/s (1 MiB / median "
        f"request time; {result.when})",
        f"read_overhead_us = {read_ovh:.0f}       # fitted: random 4 KiB read "
        f"{own['rand_read_4k_iops']:.0f} IOPS over {format_size(cap)}{lab_out} ({result.when})",
        f"write_overhead_us = {write_ovh:.0f}      " + ("# not fitted: in-AU random writes are merges" if in_order else
                                                       f"# fitted: random 4 KiB write {w_au:.0f} IOPS "
                                                       f"in one AU ({result.when})"),
        "",
        "[published]",
        f'method = "flashbed probe of {result.device}: fio direct QD1 on the raw device, {result.when}"',
        f'span = "{format_size(cap)}"',
        f"seq_read_mb_s = {r['seq_read_mb_s']:.2f}",
        f"seq_write_mb_s = {r['seq_write_mb_s']:.2f}",
        f"rand_read_4k_iops = {r['rand_read_4k_iops']:.1f}",
        f"rand_write_4k_iops = {r['rand_write_4k_iops']:.1f}",
        "",
    ]
    return "\n".join(lines + _footing(result, g, o, hybrid, in_order, (lower, upper), read_ovh, write_ovh))


def _footing(result: ProbeResult, g, o, hybrid: bool, in_order: bool, program: tuple[int, int], read_ovh: float,
             write_ovh: float) -> list[str]:
    """What the fitted preset's values rest on (devices/assumptions.py): what the probe measured, what
    is fitted to its rates, and what it cannot see, assumed within the datasheet classes' ranges (what
    `flashbed run --robust` varies)."""
    when = result.when
    out = ["# What each value rests on (`flashbed devices show`; `flashbed run --robust` varies the assumptions).",
           "[measured]"]
    if g.page:
        out.append(f'"nand.page_size" = "flashbench -a page step, {when}"')
    if g.erase_unit:
        out.append(f'"nand.pages_per_block" = "flashbench -a erase-unit step (pages x page x planes), {when}"')
    if hybrid:
        out.append(f'"ftl.open_aus" = "flashbench -O: small writes collapse past {o.count} AUs, {when}"')
    out.append(f'"ftl.host_mb_s" = "the sequential read rate (1 MiB / median request time), {when}"')
    cls = "the MLC datasheet class (tPROG typical page average 1.3-1.6 ms; docs/device-twins.md)"
    up = program[1]
    out += ["", "[fitted]",
            f'"nand.timing.program_us[1]" = {{ figure = "seq_write_mb_s", range = [{min(1000, up)}, {max(4000, up)}], '
            f'source = "the upper page of {cls}, or as far as the probed rate takes it" }}',
            f'"ftl.read_overhead_us" = {{ figure = "rand_read_4k_iops", range = [0, {max(20000, round(2 * read_ovh))}], '
            f'source = "a firmware time per command: from none to 20 ms, the order of a log-block merge" }}']
    if not in_order:
        out.append(f'"ftl.write_overhead_us" = {{ figure = "rand_write_4k_iops", range = [0, '
                   f'{max(20000, round(2 * write_ovh))}], source = "a firmware time per command: from none to 20 ms" }}')
    not_seen = "not observable from outside (a probe sees the erase unit and the rates)"
    out += ["", '[assumptions."nand.planes"]', f"range = [1, {max(4, PLANES)}]",
            f'source = "{not_seen}: one to four planes make the erase unit in NAND of the MLC class (2-plane dies, '
            f'one or two dies)"',
            "", '[assumptions."ftl.cache"]', 'range = ["16K", "1M"]',
            f'source = "{not_seen}: the SRAM buffer of a card or eMMC controller, tens of KiB to about a MiB"',
            "", '[assumptions."nand.timing.bus_mb_s"]', "range = [40, 400]",
            f'source = "{not_seen}: asynchronous ONFI 1.0 (40 MB/s) to toggle-mode 2.0 (400 MT/s) NAND buses"',
            "", '[assumptions."nand.timing.read_us"]', "range = [25, 100]",
            f'source = "{not_seen}: tR of the datasheet classes, SLC 25 us to TLC 100 us"',
            "", '[assumptions."nand.protect_paired_pages"]', "range = [false, true]",
            f'source = "{not_seen}: whether the part spares a lower page when a cut tears the program of its '
            f'upper page (a sudden-power-off claim in its datasheet, if any); power cuts on the part itself tell '
            f'(flashbed run --target ... --study powercut --power-cmd ...)"']
    if not hybrid and not in_order:
        out += ["", '[assumptions."ftl.over_provisioning"]', "range = [0.02, 0.28]",
                f'source = "{not_seen}: from a few spare blocks to 28 %, the largest of the usual set of the flash literature '
                f'set (7, 14, 28 %)"']
    return out + [""]
