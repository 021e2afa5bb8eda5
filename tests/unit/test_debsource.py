"""The host's apt sources give the Debian mirror; apt runs on private state only."""

from __future__ import annotations

import pytest

from flashbed.errors import FlashbedError
from flashbed.lab import debsource

DEB822 = """\
Types: deb
# a snapshot mirror comment
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""

ONE_LINE = """\
# deb http://old.example/debian buster main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://one.example/debian bookworm main contrib
deb-src http://one.example/debian bookworm main
"""


def test_deb822_stanzas_are_read_with_every_field():
    s = debsource.parse_deb822(DEB822)
    assert [x.uris for x in s] == [("http://mirror.example/debian",), ("http://mirror.example/debian-security",)]
    assert s[0].suites == ("bookworm", "bookworm-updates") and s[0].components == ("main",)
    assert s[0].types == ("deb",) and s[0].enabled


def test_one_line_sources_skip_comments_and_options():
    s = debsource.parse_one_line(ONE_LINE)
    assert [(x.types, x.uris, x.suites, x.components) for x in s] == [
        (("deb",), ("http://one.example/debian",), ("bookworm",), ("main", "contrib")),
        (("deb-src",), ("http://one.example/debian",), ("bookworm",), ("main",)),
    ]


def test_the_mirror_is_the_first_enabled_debian_archive_not_its_security_one():
    s = debsource.parse_deb822(DEB822)
    assert debsource.debian_mirror(list(reversed(s))) == "http://mirror.example/debian"
    off = debsource.parse_deb822(DEB822.replace("Types: deb\n# a", "Enabled: no\nTypes: deb\n# a", 1))
    with pytest.raises(FlashbedError, match="no Debian mirror in the host's apt sources"):
        debsource.debian_mirror(off)


def test_the_security_archive_is_found_apart_and_may_be_absent():
    s = debsource.parse_deb822(DEB822)
    assert debsource.debian_security_mirror(s) == "http://mirror.example/debian-security"
    assert debsource.debian_security_mirror(s[:1]) == ""
    assert debsource.debian_security_mirror(debsource.parse_one_line(
        "deb http://archive.example/ubuntu noble-security main\n")) == ""


def test_other_distributions_and_third_party_sources_are_not_taken_for_debian():
    s = debsource.parse_one_line("deb http://archive.example/ubuntu noble main\n"
                                 "deb https://vendor.example/apt stable-tools main\n")
    with pytest.raises(FlashbedError) as e:
        debsource.debian_mirror(s)
    assert "\n" not in str(e.value)


def test_host_sources_reads_sources_list_and_both_part_formats_in_order(tmp_path):
    (tmp_path / "sources.list").write_text("deb http://a.example/debian trixie main\n")
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    (parts / "b.sources").write_text(DEB822)
    (parts / "c.list").write_text(ONE_LINE)
    (parts / "d.list.disabled").write_text("deb http://never.example/debian sid main\n")
    uris = [s.uris[0] for s in debsource.host_sources(tmp_path)]
    assert uris == ["http://a.example/debian", "http://mirror.example/debian", "http://mirror.example/debian-security",
                    "http://one.example/debian", "http://one.example/debian"]
    assert debsource.debian_mirror(debsource.host_sources(tmp_path)) == "http://a.example/debian"


def test_private_apt_keeps_every_state_path_under_its_root(tmp_path):
    apt = debsource.PrivateApt(tmp_path / "apt", "http://mirror.example/debian", "trixie-backports")
    opts = apt.options()
    values = dict(o.split("=", 1) for o in opts[1::2])
    for key in ("Dir::Etc::SourceList", "Dir::State::Lists", "Dir::State::status", "Dir::Cache"):
        assert values[key].startswith(str(tmp_path)), key
    # the host's sources.list.d and preferences are never read
    assert values["Dir::Etc::SourceParts"] == "/dev/null"
    assert values["Dir::Etc::PreferencesParts"] == "/dev/null"


def test_the_private_list_names_the_host_mirror_and_the_debian_keyring(tmp_path, monkeypatch):
    key = tmp_path / "keyring.gpg"
    key.write_bytes(b"k")
    monkeypatch.setattr(debsource, "DEBIAN_KEYRING", key)
    apt = debsource.PrivateApt(tmp_path / "apt", "http://mirror.example/debian", "trixie-backports")
    apt.prepare()
    assert (tmp_path / "apt" / "sources.list").read_text() == \
        f"deb [signed-by={key}] http://mirror.example/debian trixie-backports main\n"
    assert (tmp_path / "apt" / "status").read_text() == ""


def test_a_pinned_version_no_longer_served_names_the_newest(tmp_path, monkeypatch):
    key = tmp_path / "keyring.gpg"
    key.write_bytes(b"k")
    monkeypatch.setattr(debsource, "DEBIAN_KEYRING", key)
    calls = []

    def fake_run(self, tool, *args, cwd=None):
        calls.append((tool, args))
        if args[0] == "madison":
            return ("linux-source-7.3 | 7.3.9-1~bpo13+1 | http://m trixie-backports/main amd64 Packages\n"
                    "linux-source-7.3 | 7.3.5-1~bpo13+1 | http://m trixie-backports/main amd64 Packages\n")
        return ""

    monkeypatch.setattr(debsource.PrivateApt, "run", fake_run)
    with pytest.raises(FlashbedError) as e:
        debsource.fetch_deb("linux-source-7.3", "7.3.4-1~bpo13+1", "trixie-backports", tmp_path, lambda s: None,
                            mirror="http://mirror.example/debian")
    msg = str(e.value)
    assert "linux-source-7.3 7.3.4-1~bpo13+1 is no longer served by trixie-backports" in msg
    assert "newest served: 7.3.9-1~bpo13+1" in msg and "\n" not in msg
    assert [c[1][0] for c in calls] == ["update", "madison"]  # nothing downloaded
