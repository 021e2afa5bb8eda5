"""The one exception type the CLI turns into a single clear line, and the one rule that keeps
tracebacks out of every summary and error a user reads (last_line)."""

import re


class FlashbedError(Exception):
    """A failure the user can act on: `str()` says what is wrong and what to do."""

    exit_code = 2


class HostToolMissing(FlashbedError):
    pass


# a traceback's frame line ('File "x.py", line 3, in f'), also cut short at its start
_FRAME = re.compile(r'\S*\s*"[^"]*", line \d+, in \S+|Traceback \(most recent call last\)')
_EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::|$)")


def last_line(text: str | None) -> str:
    """What a failed program said last, without a traceback: the exception's line of a Python
    traceback ('FileNotFoundError: ...', also from a tail cut mid-traceback), else the last
    non-empty line. Summaries and errors show this, never the frames."""
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    if not any(_FRAME.search(ln) for ln in lines):
        return lines[-1]
    for ln in reversed(lines):
        frames = list(_FRAME.finditer(ln))
        after = frames[-1].end() if frames else 0
        hits = [h for h in _EXCEPTION.finditer(ln) if h.start() >= after]
        if hits:
            # what a one-line summary said before the traceback began ('check step failed:')
            head = ln[:frames[0].start()].strip() if frames else ""
            return (head + " " if head else "") + ln[hits[-1].start():]
    return "the program failed (a Python traceback without its exception line)"


def no_traceback(text: str) -> str:
    """`text` as it is, or its last_line when it holds a Python traceback (or part of one)."""
    return last_line(text) if _FRAME.search(text or "") else text
