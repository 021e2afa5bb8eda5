"""Which key the user's check's verdicts may be shared by (crashhost/checkwords.py): the content key only
when every command word of the check, inside $(...) and backquotes too, provably reads no metadata."""

from pathlib import Path

import pytest

from flashbed.crashhost.checkwords import VerdictKey, choose

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def key(body: str, shebang: str = "#!/bin/sh\n") -> tuple[VerdictKey, str]:
    c = choose((shebang + body + "\n").encode())
    return c.key, c.why


@pytest.mark.parametrize("name, want", [("walcheck.sh", VerdictKey.CONTENT), ("ota-check.sh", VerdictKey.CONTENT),
                                        ("sqlite-check.sh", VerdictKey.TREE), ("rotating-check.sh", VerdictKey.TREE)])
def test_the_shipped_checks(name, want):
    assert choose((EXAMPLES / name).read_bytes()).key is want


@pytest.mark.parametrize("body", [
    'want=$(grep -o "records=[0-9]*" "${FLASHBED_ACKED:-/dev/null}" | tail -n 1 | cut -d= -f2)',
    "got=$(dd if=wal.log bs=512 skip=$((i - 1)) count=1 status=none 2>&1)",
    'i=1\nwhile [ "$i" -le "$want" ]; do i=$((i + 1)); done',
    '[ "$got" = "$(printf "%-511s" "record $i")" ] || { echo "lost"; exit 1; }',
    "if [ -s wal.log ]; then echo ok; else exit 1; fi",
    "[ ! -e x ] && [ -z \"$a\" ] && test -f y",
    "for f in *.log; do cat \"$f\"; done | wc -l",
    'case "$slot" in a|b) ;; *) echo "bad $slot"; exit 1 ;; esac',
    "read -r slot round < current || true",
    "x=`cat a | md5sum | cut -c1-32`",
    "lround=${last%%:*} rest=${last#*:}; lsum=${rest#*:}",
    "fail() { echo \"$1\"; exit 1; }\n[ -s log ] || fail 'no log'",
    "/usr/bin/cmp -s a b && /bin/head -c 10 a | od -c",
    "exec 2>&1\nsort -u a | uniq -c | tr -s ' '",
    "[[ -s a && $(wc -c < a) -gt 3 ]]",
    "n=$(seq 1 3 | tail -n 1); expr \"$n\" + 1 > /dev/null",
    "sha256sum a b | cut -d' ' -f1; basename \"$PWD\"",
])
def test_content_only_checks_take_the_content_key(body):
    assert key(body) == (VerdictKey.CONTENT, key("true")[1]), key(body)


@pytest.mark.parametrize("body, why", [
    ("stat -c %Y wal.log", "stat"),
    ("t=$(stat -c %Y wal.log)", "stat"),
    ('t="$(echo $(stat -c %s x))"', "stat"),
    ("t=`ls -l`", "ls"),
    ("echo $(( $(stat -c %s x) + 1 ))", "stat"),
    ("x=${y:-$(find . -newer a)}", "find"),
    ("cat <(du -s .)", "du"),
    ("[ a -nt b ] && echo newer", "-nt"),
    ("[ -x wal.log ] && echo runnable", "-x"),  # permission bits: not in the content key
    ("test -k d || exit 1", "-k"),
    ("test a -ot b", "-ot"),
    ("[ a -ef b ]", "-ef"),
    ("[ -O a ]", "-O"),
    ("[ -N a ]", "-N"),
    ("[[ $a -nt $b ]]", "-nt"),
    ('[ "$a" "$op" "$b" ]', "operators depend on expansions"),
    ("[ $x = y ]", "unquoted expansion"),
    ("[ x = y -a \"$a\" = b ]", "operators depend on expansions"),
    ("[ a $'-nt' b ]", "unquoted expansion"),
    ("$'stat' x", "named by an expansion"),
    ("$cmd wal.log", "named by an expansion"),
    ('"$0" again', "named by an expansion"),
    ('eval "cat x"', "eval"),
    (". ./lib.sh", "`.`"),
    ("source ./lib.sh", "source"),
    ("sh -c 'cat x'", "sh"),
    ("exec stat x", "exec"),
    ("command cat x", "command"),
    ("trap 'stat x' EXIT", "trap"),
    ("alias cat=stat", "alias"),
    ("f() { cat; }\nunset -f f\nf x", "unset -f"),
    ("f x\nf() { cat; }", "it runs f"),
    ("if true; then f() { cat; }; fi\nf x", "it runs f"),
    ("awk '{print}' x", "awk"),
    ("sed -n 1p x", "sed"),
    ("cat x | xargs echo", "xargs"),
    ("env cat x", "env"),
    ("sqlite3 db 'select 1'", "sqlite3"),
    ("date +%s", "date"),
    ("./tool x", "./tool"),
    ("/usr/local/bin/cat x", "/usr/local/bin/cat"),
    ("tar tf a.tar", "tar"),
    ("cp a b", "cp"),
    ("sort --compress-program=gzip a", "sort"),
    ("PATH=.:$PATH; cat x", "PATH"),
    ("IFS=:; cat x", "IFS"),
    ("cat <<EOF\nhello\nEOF", "here-document"),
])
def test_a_check_that_may_read_metadata_keeps_the_tree_key(body, why):
    k, said = key(body)
    assert k is VerdictKey.TREE and why in said, said


def test_other_programs_and_interpreters_keep_the_tree_key():
    assert choose(b"\x7fELF\x02\x01\x01" + b"\x00" * 40).key is VerdictKey.TREE
    assert "python3" in choose(b"#!/usr/bin/python3\nprint(1)\n").why
    assert key("cat x", "#!/bin/bash -eu\n")[0] is VerdictKey.CONTENT
    assert key("cat x", "#!/usr/bin/env bash\n")[0] is VerdictKey.CONTENT
    assert key("cat x", "")[0] is VerdictKey.CONTENT  # no #!: the shell runs it


def test_words_that_only_look_like_commands_are_not_judged():
    assert key("echo stat ls find; grep -c 'stat' x  # ls -l in a comment")[0] is VerdictKey.CONTENT
    assert key("for ls in a b; do echo \"$ls\"; done")[0] is VerdictKey.CONTENT
    assert key("[ \"$x\" ]; [ -n \"$x\" ] && [ \"$x\" = -y ]")[0] is VerdictKey.CONTENT
