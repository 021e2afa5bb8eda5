"""Whether the user's check can see a recovered tree only through its contents: decided once, from
the check's words, so that its verdict may be shared by every tree with the same contents (the
CONTENT key, verdicts.py) and not only by trees equal in every attribute the tree key covers.

Two recovered trees with the same names, types, sizes, bytes and symlink targets still differ
in what only metadata calls show: modification times (each filesystem stamps its own), owners and
permission bits (vfat has none of its own), link counts, extended attributes, inode numbers. A check that never makes such
a call gives both trees one verdict. That is proved here conservatively, from the shell words of a
`sh` script: every command word, those inside `$(...)`, backquotes and `<(...)` included, must be

- a shell keyword, or a builtin of BUILTINS (no `eval`, `.`/`source`, `exec PROGRAM`, `command`,
  `trap`, `alias`: each would run words this analysis did not see);
- a function the script defined before, at its top level; or
- a program of PROGRAMS (by name, or as /bin/NAME or /usr/bin/NAME): programs whose output is a
  function of the contents, names and types of the files they are given. `test`/`[`/`[[` without
  the comparisons that read metadata (-nt, -ot, -ef, -O, -G, -N, and -x, -u, -g, -k: permission bits), with any word that could turn
  into an operator after expansion ruled out; `sort` without a program of its own to run.

Anything else keeps the full tree key, with the first reason found: a program not on the list (ls,
stat, find, du, tar, cp, awk, sed, xargs, env, sqlite3, date, a path), a command named by an
expansion, an ELF program, another interpreter, a here-document (not analysed), an assignment to
PATH or IFS (it changes which program a name runs, or how words split).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

# programs whose output depends on file contents, names and types only (documented in your-workload.md)
PROGRAMS = frozenset({
    "dd", "grep", "egrep", "fgrep", "cut", "head", "tail", "cat", "tac", "cmp", "wc", "tr", "od", "printf", "echo",
    "test", "[", "seq", "expr", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum",
    "cksum", "true", "false", "sort", "uniq", "basename", "dirname", "sleep"})
# builtins that read no file metadata and run no words of their own
BUILTINS = frozenset({
    ":", "true", "false", "echo", "printf", "test", "[", "exit", "return", "set", "shift", "read", "cd", "pwd",
    "export", "readonly", "local", "unset", "break", "continue", "wait", "getopts", "let", "declare", "typeset",
    "umask"})
# builtins that run words this analysis does not see, or change what a name runs
REFUSED = {
    "eval": "eval runs words built at run time", ".": "`.` runs another file's words",
    "source": "source runs another file's words", "command": "`command` runs a program named after it",
    "builtin": "`builtin` runs a builtin named after it", "trap": "trap runs words later",
    "alias": "an alias changes what a name runs", "unalias": "unalias changes what a name runs",
    "enable": "enable changes what a name runs", "hash": "hash can change what a name runs",
    "exec": "exec runs a program named after it", "time": "time is a program here, not on the list",
    "coproc": "coproc runs a program", "shopt": "shopt changes how words expand"}
KEYWORDS_OPEN = frozenset({"if", "while", "until", "{", "("})
KEYWORDS_CMD = frozenset({"then", "do", "else", "elif", "!"})
KEYWORDS_CLOSE = frozenset({"fi", "done", "}", "esac"})
# -x, -u, -g and -k read permission bits, which the content key leaves out (trees.pack_keys); -r and -w
# do not: the check is root of its namespace over a copy it owns, and may read and write whatever the modes
METADATA_TESTS = frozenset({"-nt", "-ot", "-ef", "-O", "-G", "-N", "-x", "-u", "-g", "-k"})
SAFE_BINARY = frozenset({"=", "==", "!=", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "<", ">"})
SHELLS = frozenset({"sh", "dash", "bash"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\+?=")
_SEPARATORS = frozenset({";", "&", "&&", "||", "|", "|&", "\n", "(", ";;", ";&", ";;&"})
_REDIRECTS = ("<<<", "<<-", "<<", ">>", ">&", "<&", "<>", ">|", "&>>", "&>", ">", "<")
_OPS = ("&&", "||", ";;&", ";;", ";&", "|&", "|", "&", ";", "(", ")")


class VerdictKey(StrEnum):
    """What a shared verdict is keyed by (verdicts.py)."""

    CONTENT = "content"  # paths, types, sizes, bytes, symlink targets, read-only
    TREE = "tree"  # everything the tree key covers (owners, times, link structure, xattrs too)


@dataclass(frozen=True)
class KeyChoice:
    key: VerdictKey
    why: str  # why this key: the check's words, or the first word that ruled the content key out

    def said(self) -> str:
        return f"{self.key} key: {self.why}"


class NotProved(Exception):
    """A word that may read metadata (the reason)."""


@dataclass
class _Word:
    text: str  # the word with quotes removed where that is known (literal words)
    raw: str
    literal: bool  # no expansion, no unquoted glob: `text` is what the shell passes
    splits: bool  # an unquoted expansion or glob: may become several words (or none)
    numeric: bool  # only unquoted arithmetic or $#/$?/$$/$! (one integer word)
    ionumber: bool = False  # the digits before a redirection (2>)
    subs: tuple[str, ...] = ()  # the command substitutions inside it (scripts of their own)


@dataclass
class _Op:
    text: str


@lru_cache(maxsize=64)
def choose(check: bytes) -> KeyChoice:
    """The key a verdict of the check `check` (its file's bytes) may be shared by."""
    try:
        _script_words(check)
    except NotProved as e:
        return KeyChoice(VerdictKey.TREE, str(e))
    return KeyChoice(VerdictKey.CONTENT, "every command of the check is a shell builtin or a program that reads "
                                         "file contents only")


def _script_words(check: bytes) -> None:
    if check.startswith(b"\x7fELF"):
        raise NotProved("it is a program, whose calls are not analysed")
    text = check.decode("utf-8", "replace")
    if text.startswith("#!"):
        line = text.split("\n", 1)[0][2:].split()
        prog = line[0].rsplit("/", 1)[-1] if line else ""
        if prog == "env" and len(line) > 1:
            prog = line[1].rsplit("/", 1)[-1]
        if prog not in SHELLS:
            raise NotProved(f"its interpreter is {line[0] if line else 'empty'}, not a shell")
    if re.search(r"\b(PATH|IFS|BASH_ENV|ENV)\b\s*\+?=|\b(export|read|readonly|local|declare|typeset)\b[^\n;]*"
                 r"\b(PATH|IFS|BASH_ENV)\b", text):
        raise NotProved("it sets PATH or IFS (which program a name runs, how words split)")
    _Parser(_lex(text), set()).commands()


# --- words ------------------------------------------------------------------------------------

class _Lexer:
    def __init__(self, text: str, bodies: list[str]):
        self.s = text
        self.i = 0
        self.bodies = bodies  # every command substitution's text, to be analysed as a script of its own

    def tokens(self) -> list:
        out: list = []
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t":
                self.i += 1
            elif s.startswith("\\\n", self.i):
                self.i += 2
            elif c == "#":
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
            elif c == "\n":
                out.append(_Op("\n"))
                self.i += 1
            elif s.startswith(("<(", ">("), self.i):
                self.i += 1
                out.append(_Word("", "<(...)", False, True, False, subs=(self._paren_body(),)))
            else:
                op = next((o for o in _REDIRECTS + _OPS if s.startswith(o, self.i)), None)
                if op is not None:
                    out.append(_Op(op))
                    self.i += len(op)
                    if op in ("<<", "<<-"):
                        raise NotProved("it has a here-document (not analysed)")
                else:
                    n = len(self.bodies)
                    w = self._word()
                    w.subs = tuple(self.bodies[n:])
                    out.append(w)
        return out

    def _paren_body(self) -> str:
        """From an opening parenthesis at self.i: the text up to its match (quotes respected)."""
        s, depth, start = self.s, 0, self.i + 1
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                self.i += 2
                continue
            if c == "'":
                self.i = self._skip_single(self.i + 1)
                continue
            if c == '"':
                self._double()
                continue
            if c == "`":
                self._backquote()
                continue
            if c == "#" and (self.i == 0 or s[self.i - 1] in " \t\n;(") and depth > 0:
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    body = s[start:self.i]
                    self.i += 1
                    if re.search(r"(^|[\s;(&|])case\s", body):
                        raise NotProved("a case inside $(...) (not analysed)")
                    return body
            self.i += 1
        raise NotProved("an unclosed parenthesis")

    def _skip_single(self, i: int) -> int:
        j = self.s.find("'", i)
        if j < 0:
            raise NotProved("an unclosed quote")
        return j + 1

    def _dollar(self) -> tuple[bool, bool]:
        """At '$': skips the expansion; (was it one, is it a single integer word)."""
        s, i = self.s, self.i
        nxt = s[i + 1] if i + 1 < len(s) else ""
        if s.startswith("$((", i):
            self.i += 1
            body = self._paren_body()  # arithmetic: a command substitution inside it is analysed
            self._scan_substitutions(body[1:-1] if body.startswith("(") else body)
            return True, True
        if nxt == "(":
            self.i += 1
            self.bodies.append(self._paren_body())
            return True, False
        if nxt == "{":
            depth, j = 0, i + 1
            while j < len(s):
                if s[j] == "\\":
                    j += 2
                    continue
                if s[j] == "'":
                    j = self._skip_single(j + 1)
                    continue
                if s[j] == "{":
                    depth += 1
                elif s[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(s):
                raise NotProved("an unclosed ${")
            self._scan_substitutions(s[i + 2:j])
            self.i = j + 1
            return True, False
        if nxt == "'":  # $'...' (bash): text with escapes of its own: not read as a literal here
            self.i = self._skip_single(i + 2)
            return True, False
        if nxt == '"':  # $"..." (bash): a translated string: not read as a literal here
            self.i += 1
            return True, False
        if nxt in "#?$!":
            self.i += 2
            return True, True
        if nxt and (nxt.isalnum() or nxt in "_@*-"):
            m = _NAME.match(s, i + 1)
            self.i = m.end() if m else i + 2
            return True, False
        self.i += 1  # a lone $
        return False, False

    def _scan_substitutions(self, text: str) -> None:
        """Command substitutions within `text` (an arithmetic expression, a ${...}): analysed too."""
        sub = _Lexer(text, self.bodies)
        while sub.i < len(text):
            if text[sub.i] == "$":
                sub._dollar()
            elif text[sub.i] == "`":
                sub._backquote()
            else:
                sub.i += 1

    def _backquote(self) -> None:
        s, j = self.s, self.i + 1
        body = []
        while j < len(s) and s[j] != "`":
            if s[j] == "\\" and j + 1 < len(s) and s[j + 1] in "`\\$":
                body.append(s[j + 1])
                j += 2
                continue
            body.append(s[j])
            j += 1
        if j >= len(s):
            raise NotProved("an unclosed backquote")
        self.bodies.append("".join(body))
        self.i = j + 1

    def _double(self) -> bool:
        """At '"': skips the quoted text; whether it held an expansion."""
        s = self.s
        self.i += 1
        exp = False
        while self.i < len(s) and s[self.i] != '"':
            c = s[self.i]
            if c == "\\":
                self.i += 2
            elif c == "$":
                e, _ = self._dollar()
                exp = exp or e
            elif c == "`":
                self._backquote()
                exp = True
            else:
                self.i += 1
        if self.i >= len(s):
            raise NotProved("an unclosed double quote")
        self.i += 1
        return exp

    def _word(self) -> _Word:
        s, start = self.s, self.i
        text: list[str] = []
        literal, splits, quoted_exp, numeric_only, any_unquoted_exp = True, False, False, True, False
        while self.i < len(s) and s[self.i] not in " \t\n;&|()<>":
            c = s[self.i]
            if c == "\\":
                text.append(s[self.i + 1:self.i + 2])
                self.i += 2
            elif c == "'":
                j = self._skip_single(self.i + 1)
                text.append(s[self.i + 1:j - 1])
                self.i = j
            elif c == '"':
                k = self.i
                if self._double():
                    quoted_exp, literal = True, False
                text.append(s[k + 1:self.i - 1])
            elif c == "$":
                exp, numeric = self._dollar()
                if exp:
                    literal, any_unquoted_exp = False, True
                    numeric_only = numeric_only and numeric
                else:
                    text.append("$")
            elif c == "`":
                self._backquote()
                literal, any_unquoted_exp, numeric_only = False, True, False
            else:
                if c in "*?[":
                    literal, splits = False, True
                text.append(c)
                self.i += 1
        raw = s[start:self.i]
        ionumber = raw.isdigit() and self.i < len(s) and s[self.i] in "<>"
        if any_unquoted_exp and not numeric_only:
            splits = True
        numeric = any_unquoted_exp and numeric_only and not quoted_exp and not splits
        if raw in ("[", "[[", "]]"):
            literal, splits = True, False
        return _Word("".join(text), raw, literal, splits, numeric, ionumber)


def _lex(text: str) -> list:
    return _Lexer(text, []).tokens()


# --- commands ---------------------------------------------------------------------------------

class _Parser:
    """Walks the tokens; every command word judged (NotProved on the first that is not provably
    content-only). `functions`: the names defined so far at the top level (callable)."""

    def __init__(self, toks: list, functions: set[str]):
        self.toks = toks
        self.functions = functions
        self.i = 0
        self.depth = 0
        self.passed = 0  # tokens whose command substitutions were analysed

    def _substitutions(self) -> None:
        """The command substitutions of the words passed so far, each a script of its own (a subshell:
        it sees the functions defined before it, and its own stay inside)."""
        for t in self.toks[self.passed:self.i]:
            for body in getattr(t, "subs", ()):
                _Parser(_lex(body), set(self.functions)).commands()
        self.passed = max(self.passed, self.i)

    def _peek(self, k: int = 0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def commands(self) -> None:
        start = True  # at the start of a statement (a function may be defined here)
        expect = True  # a command word may come
        while self.i < len(self.toks):
            self._substitutions()
            t = self.toks[self.i]
            if isinstance(t, _Op):
                self.i += 1
                if t.text in ("(",):
                    self.depth += 1
                    expect, start = True, False
                elif t.text == ")":
                    self.depth -= 1
                    expect, start = False, False
                elif t.text in (";;", ";&", ";;&"):
                    self._patterns()
                    expect, start = True, False
                elif t.text in _SEPARATORS:
                    expect = True
                    start = t.text in ("\n", ";", "&")
                elif t.text in _REDIRECTS:
                    self.i += 1  # its target
                continue
            if not expect:
                raise NotProved(f"'{t.raw}' where a command ended (not analysed)")
            if t.ionumber:
                self.i += 1
                continue
            if t.literal and t.text in KEYWORDS_CMD | KEYWORDS_OPEN | KEYWORDS_CLOSE | {"for", "select", "case",
                                                                                      "function", "[[", "in"}:
                self._keyword(t.text)
                start, expect = False, t.text not in KEYWORDS_CLOSE
                continue
            expect = self._simple(start)  # after a function's name(): its body
            start = False
        self.i = len(self.toks)
        self._substitutions()

    def _keyword(self, kw: str) -> None:
        self.i += 1
        if kw in KEYWORDS_OPEN:
            self.depth += 1
        elif kw in ("fi", "done", "}"):
            self.depth -= 1
        elif kw == "esac":
            self.depth -= 1
        elif kw in ("for", "select"):
            self.depth += 1
            self._until_separator()  # the name, `in` and its words: no command among them
        elif kw == "case":
            self.depth += 1
            self.i += 1  # the word
            t = self._peek()
            if not (isinstance(t, _Word) and t.text == "in"):
                raise NotProved("a case without `in` (not analysed)")
            self.i += 1
            self._patterns()
        elif kw == "function":
            t = self._peek()
            if not isinstance(t, _Word) or not t.literal:
                raise NotProved("a function named by an expansion")
            if self.depth == 0:
                self.functions.add(t.text)
            self.i += 1
            if isinstance(self._peek(), _Op) and self._peek().text == "(":
                self.i += 2
        elif kw == "[[":
            while True:
                t = self._peek()
                if t is None:
                    raise NotProved("an unclosed [[")
                self.i += 1
                if isinstance(t, _Word) and t.raw == "]]":
                    return
                if isinstance(t, _Word) and t.literal and t.text in METADATA_TESTS:
                    raise NotProved(f"[[ {t.text} ]] reads file metadata")
        elif kw == "in":
            raise NotProved("`in` out of place (not analysed)")

    def _until_separator(self) -> None:
        while (t := self._peek()) is not None and not (isinstance(t, _Op) and t.text in (";", "\n")):
            if isinstance(t, _Word) and t.literal and t.text == "do":
                return
            self.i += 1

    def _patterns(self) -> None:
        """A case's patterns up to `)` (or its `esac`)."""
        while (t := self._peek()) is not None:
            if isinstance(t, _Op) and t.text == "\n":
                self.i += 1
                continue
            if isinstance(t, _Word) and t.literal and t.text == "esac":
                return  # the command loop closes it
            break
        if isinstance(self._peek(), _Op) and self._peek().text == "(":
            self.i += 1
        while (t := self._peek()) is not None:
            self.i += 1
            if isinstance(t, _Op) and t.text == ")":
                return
            if isinstance(t, _Op) and t.text not in ("|",):
                raise NotProved(f"'{t.text}' in a case pattern (not analysed)")
        raise NotProved("an unclosed case pattern")

    def _simple(self, start: bool) -> bool:
        """One simple command from self.i: assignments, redirections, its name, its arguments. True: it
        was a function's name() (its body follows)."""
        name: _Word | None = None
        args: list[_Word] = []
        while (t := self._peek()) is not None:
            if isinstance(t, _Op):
                if t.text in _REDIRECTS:
                    self.i += 2  # the operator and its target
                    continue
                if t.text == "(" and name is not None and not args:  # name() { ...; }: a function
                    nxt = self._peek(1)
                    if not (isinstance(nxt, _Op) and nxt.text == ")"):
                        raise NotProved(f"'{name.raw}(' (not analysed)")
                    self.i += 2
                    if not name.literal:
                        raise NotProved("a function named by an expansion")
                    if self.depth == 0 and start:
                        self.functions.add(name.text)
                    return True
                break
            self.i += 1
            if t.ionumber:
                continue
            if name is None:
                m = _ASSIGN.match(t.raw)
                if m:
                    continue
                name = t
                continue
            args.append(t)
        if name is not None:
            self._judge(name, args)
        return False

    def _judge(self, name: _Word, args: list[_Word]) -> None:
        if not name.literal:
            raise NotProved(f"a command is named by an expansion ({name.raw})")
        word = name.text
        if word in REFUSED and not (word == "exec" and not args):
            raise NotProved(REFUSED[word])
        prog = word
        if "/" in word:
            head, _, prog = word.rpartition("/")
            if head not in ("/bin", "/usr/bin") or prog not in PROGRAMS:
                raise NotProved(f"it runs {word}, a program not on the list of those that read contents only")
        elif word in self.functions or word in BUILTINS or word == "exec":
            pass
        elif word not in PROGRAMS:
            raise NotProved(f"it runs {word}, a program not on the list of those that read contents only")
        if prog == "unset" and any(a.literal and a.text.startswith("-") and "f" in a.text for a in args):
            raise NotProved("unset -f can make a function's name run a program")
        if prog == "sort" and any(not a.literal or a.text.startswith("--compress") for a in args):
            raise NotProved("sort may run a program of its own (--compress-program)")
        if prog in ("test", "["):
            _test_args(args[:-1] if prog == "[" and args and args[-1].raw == "]" else args)


def _test_args(args: list[_Word]) -> None:
    """test's words: no metadata comparison, and none that could become one after expansion."""
    for a in args:
        if a.literal and a.text in METADATA_TESTS:
            raise NotProved(f"test {a.text} reads file metadata")
        if a.splits and not a.numeric:
            raise NotProved(f"test with an unquoted expansion ({a.raw}) may be given any operator")
    fixed = [a.literal or a.numeric for a in args]
    if all(fixed):
        return
    n = len(args)
    op = lambda k: args[k].literal  # noqa: E731 - a word that is what it says
    if n == 1:
        return  # a single word is a string test whatever it holds
    if n == 2 and op(0):
        return
    if n == 3 and op(1) and args[1].text in SAFE_BINARY:
        return
    if n == 3 and op(0) and args[0].text == "!" and op(1):
        return
    raise NotProved("a test whose operators depend on expansions (not analysed)")
