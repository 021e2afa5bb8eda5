"""Fetch a Debian package's .deb, or its source, with apt's own client,
signature checks and all, without touching the host's apt configuration.

apt-get runs with a private sources list, lists, cache and an empty dpkg
status, all under flashbed's cache directory; the only things taken from the
host are its apt.conf settings (a proxy, say) and the Debian mirror its own
sources name, so the repository never names a mirror. A package is only
unpacked (dpkg-deb -x), never installed; a source package is unpacked by
apt-get source (dpkg-source -x) after apt checks its files against the signed
Sources index.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import FlashbedError

# the Debian archive's signing keys (package debian-archive-keyring); it carries
# the keys of the releases after the host's own too
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
APT_ETC = Path("/etc/apt")
# Debian's release names and aliases: an apt source with one of these suites is
# a Debian mirror (Ubuntu's or a third party's suites have other names)
DEBIAN_SUITES = frozenset({
    "buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
    "oldoldstable", "oldstable", "stable", "testing", "unstable",
})
DEBIAN_POCKETS = frozenset({"", "updates", "backports", "backports-sloppy", "proposed-updates"})


@dataclass(frozen=True)
class AptSource:
    """One entry of an apt sources file, one-line or deb822 style."""

    types: tuple[str, ...]
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]
    enabled: bool = True


def parse_one_line(text: str) -> list[AptSource]:
    """`deb [opt=val ...] URI SUITE COMPONENT...` lines (sources.list, *.list)."""
    out = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        line = re.sub(r"\[[^\]]*\]", " ", line)  # options: not needed here
        words = line.split()
        if len(words) < 3 or words[0] not in ("deb", "deb-src"):
            continue
        out.append(AptSource(types=(words[0],), uris=(words[1],), suites=(words[2],),
                             components=tuple(words[3:])))
    return out


def parse_deb822(text: str) -> list[AptSource]:
    """Stanzas of `Field: value` lines separated by blank lines (*.sources)."""
    out = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        last = ""
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and last:  # continuation (e.g. an inline key)
                fields[last] += "\n" + line.strip()
                continue
            name, colon, value = line.partition(":")
            if colon:
                last = name.strip().lower()
                fields[last] = value.strip()
        if "types" not in fields or "uris" not in fields:
            continue
        out.append(AptSource(
            types=tuple(fields["types"].split()), uris=tuple(fields["uris"].split()),
            suites=tuple(fields.get("suites", "").split()), components=tuple(fields.get("components", "").split()),
            enabled=fields.get("enabled", "yes").lower() not in ("no", "false", "0"),
        ))
    return out


def host_sources(etc: Path = APT_ETC) -> list[AptSource]:
    """Every entry of the host's apt sources, in apt's own reading order."""
    out: list[AptSource] = []
    main = etc / "sources.list"
    if main.is_file():
        out += parse_one_line(main.read_text(errors="replace"))
    parts = etc / "sources.list.d"
    if parts.is_dir():
        for f in sorted(parts.iterdir()):
            if f.suffix == ".list":
                out += parse_one_line(f.read_text(errors="replace"))
            elif f.suffix == ".sources":
                out += parse_deb822(f.read_text(errors="replace"))
    return out


def _debian_suite(suite: str) -> bool:
    # bookworm, bookworm-updates, bookworm-backports: yes; bookworm-security
    # lives in another archive (and URI)
    name, _, pocket = suite.partition("-")
    return name in DEBIAN_SUITES and pocket in DEBIAN_POCKETS


def debian_mirror(sources: list[AptSource]) -> str:
    """The URI of the first enabled Debian archive mirror (not its security archive)."""
    for s in sources:
        if not s.enabled or "deb" not in s.types or "main" not in s.components:
            continue
        if any(_debian_suite(suite) for suite in s.suites):
            return s.uris[0].rstrip("/")
    raise FlashbedError(f"no Debian mirror in the host's apt sources ({APT_ETC}/sources.list, "
                        f"{APT_ETC}/sources.list.d): add one (suite bookworm or later, component main)")


def debian_security_mirror(sources: list[AptSource]) -> str:
    """The URI of the first enabled Debian security archive ('' if the sources name none):
    a stock root of another suite (scripts/fresh-host.sh) takes its security updates from it."""
    for s in sources:
        if s.enabled and "deb" in s.types and "main" in s.components and any(
                x.partition("-")[0] in DEBIAN_SUITES and x.partition("-")[2] == "security" for x in s.suites):
            return s.uris[0].rstrip("/")
    return ""


@dataclass(frozen=True)
class PrivateApt:
    """apt-get / apt-cache with every state and list path under `root`."""

    root: Path
    mirror: str
    suite: str
    types: tuple[str, ...] = ("deb",)  # ("deb-src",) for source packages

    def options(self) -> list[str]:
        r = self.root
        # as root, apt downloads as user _apt, who cannot enter a private
        # cache in a home directory
        sandbox = ["-o", "APT::Sandbox::User=root"] if os.geteuid() == 0 else []
        return sandbox + [
            "-o", f"Dir::Etc::SourceList={r / 'sources.list'}",
            "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", "Dir::Etc::Preferences=/dev/null",
            "-o", "Dir::Etc::PreferencesParts=/dev/null",
            "-o", f"Dir::State::Lists={r / 'lists'}",
            "-o", f"Dir::State::status={r / 'status'}",
            "-o", f"Dir::Cache={r / 'cache'}",
        ]

    def prepare(self) -> None:
        if not DEBIAN_KEYRING.is_file():
            raise FlashbedError(f"{DEBIAN_KEYRING} is missing: apt-get install debian-archive-keyring")
        for d in (self.root / "lists" / "partial", self.root / "cache" / "archives" / "partial"):
            d.mkdir(parents=True, exist_ok=True)
        (self.root / "status").touch()
        (self.root / "sources.list").write_text("".join(
            f"{t} [signed-by={DEBIAN_KEYRING}] {self.mirror} {self.suite} main\n" for t in self.types))

    def run(self, tool: str, *args: str, cwd: Path | None = None) -> str:
        cmd = [tool, *self.options(), *args]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
        if r.returncode != 0:
            lines = [l for l in (r.stderr or r.stdout).splitlines() if l.strip()]
            raise FlashbedError(f"{tool} {args[0]} ({self.suite}) failed: {lines[-1] if lines else 'no output'}")
        return r.stdout

    def versions(self, package: str) -> list[str]:
        """Versions of `package` the suite serves, newest first (apt-cache madison)."""
        out = self.run("apt-cache", "madison", package)
        return [line.split("|")[1].strip() for line in out.splitlines() if line.count("|") >= 2]


def _serving_apt(package: str, version: str, suite: str, root: Path, log: Callable[[str], None],
                 mirror: str | None, types: tuple[str, ...], who: str, pinned_in: str) -> PrivateApt:
    """A private apt with fresh, signature-checked lists of `suite` that serves `package`=`version`."""
    apt = PrivateApt(root / "apt" / (suite if types == ("deb",) else f"{suite}-{'+'.join(types)}"),
                     mirror or debian_mirror(host_sources()), suite, types)
    apt.prepare()
    log(f"{who}: fetching the {suite} package lists with apt (signature checked)")
    apt.run("apt-get", "update", "-q", "--error-on=any")
    served = apt.versions(package)
    if version not in served:
        newest = served[0] if served else "none"
        raise FlashbedError(f"{package} {version} is no longer served by {suite} (newest served: {newest}): "
                            f"update the pinned version in {pinned_in}")
    return apt


def fetch_deb(package: str, version: str, suite: str, root: Path,
              log: Callable[[str], None], mirror: str | None = None) -> Path:
    """Download `package`=`version` from `suite` into root/debs (once); its path."""
    debs = root / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    # apt-get download names the file with the version's epoch-less, colon-escaped form
    existing = [p for p in debs.glob(f"{package}_*.deb") if _deb_version(p) == version]
    if existing:
        return existing[0]
    apt = _serving_apt(package, version, suite, root, log, mirror, ("deb",), "kernel", "flashbed's kernel list")
    log(f"kernel: downloading {package} {version}")
    apt.run("apt-get", "download", "-q", f"{package}={version}", cwd=debs)
    got = [p for p in debs.glob(f"{package}_*.deb") if _deb_version(p) == version]
    if not got:
        raise FlashbedError(f"apt-get download left no {package} {version} .deb in {debs}")
    return got[0]


def fetch_source(package: str, version: str, suite: str, root: Path, log: Callable[[str], None],
                 pinned_in: str, mirror: str | None = None) -> Path:
    """The unpacked source tree of source package `package`=`version` from `suite`
    (Debian's patches applied), under root/sources (fetched once); its path."""
    dest = root / "sources" / f"{package}_{version.replace(':', '%3a')}"
    done = dest / ".unpacked"
    if done.exists():
        return Path(done.read_text().strip())
    apt = _serving_apt(package, version, suite, root, log, mirror, ("deb-src",), package, pinned_in)
    log(f"{package}: downloading and unpacking the {package} {version} source")
    if dest.exists():  # an interrupted earlier try
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    apt.run("apt-get", "source", "-q", f"{package}={version}", cwd=dest)
    trees = [p for p in dest.iterdir() if p.is_dir()]
    if len(trees) != 1:
        raise FlashbedError(f"apt-get source left {len(trees)} source trees in {dest}, not one")
    done.write_text(f"{trees[0]}\n")
    return trees[0]


def _deb_version(deb: Path) -> str:
    r = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True)
    return r.stdout.strip()


def unpack(deb: Path, dest: Path) -> Path:
    """dpkg-deb -x into dest (no install); dest."""
    if not (dest / ".unpacked").exists():
        dest.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], capture_output=True, text=True)
        if r.returncode != 0:
            raise FlashbedError(f"dpkg-deb -x {deb.name} failed: {r.stderr.strip()[-300:]}")
        (dest / ".unpacked").touch()
    return dest
