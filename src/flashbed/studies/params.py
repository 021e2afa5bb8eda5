"""Study parameters: one frozen dataclass per study, defaults written once,
values checked once at the edge.

A study declares its parameters as a dataclass `Params` of `param(...)` fields
(type, default, unit, allowed values or range). Profiles and `--set STUDY.KEY=VALUE`
only override fields; `check(study, Params, values)` turns their loosely typed values
(a profile's Python values, or the CLI's text, each read by its field's kind) into a
Params, or says in one line what is wrong and what would be right.

Every number declares its range (`low`, `high`, or `above` for an open lower end):
a value outside it, NaN or infinity is refused where it is given, before a lab boots.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from typing import Any

from ..errors import FlashbedError
from ..userwork import Kind as FileKind
from ..userwork import UserFile


def param(default: Any, *, unit: str = "", choices: tuple = (), help: str = "", per_case: str = "",
          low: float | None = None, high: float | None = None, above: float | None = None,
          pattern: str = "", form: str = "", set_by: str = "") -> Any:
    """A parameter field: its default, unit ("bytes" makes it a size: 256M), allowed values.
    A number's range: `low` <= value <= `high` (either may be None: unbounded), or `above`
    < value. A word without choices may take a `pattern` (a regular expression the whole
    value matches), described to the user as `form`. `per_case` names the list field a
    case takes it from (the study's cases() sets it). `set_by`: the option that alone sets it
    (e.g. --workload: a file and its content hash, checked together), never --set."""
    return dataclasses.field(default=default, metadata={"unit": unit, "choices": tuple(choices), "help": help,
                                                        "per_case": per_case, "low": low, "high": high,
                                                        "above": above, "pattern": pattern, "form": form,
                                                        "set_by": set_by})


def user_file(option: str, *, keys: tuple[str, str, str | None] = ("file", "digest", "kind"), help: str = "") -> Any:
    """A user's file (userwork.UserFile: its path, kind and content hash), set by `option` alone
    (with the checks userwork.load makes; --set refuses it); a run's request, its id and a
    result's parameters hold it as `keys`: its path, its content hash and, for a file that may
    be a fio job, its kind. The field is named as its path's key."""
    return dataclasses.field(default=None, metadata={"help": help, "set_by": option, "user_file": keys})


@dataclasses.dataclass(frozen=True)
class Kind:
    """How one field's values are read and described."""

    base: type  # int, float, bool, str
    many: bool = False  # a tuple of them
    optional: bool = False  # None allowed (e.g. "derived from the device")
    unit: str = ""
    choices: tuple = ()
    per_case: str = ""  # set by the study per case, from this list field
    low: float | None = None  # a number's range (inclusive); None: unbounded
    high: float | None = None
    above: float | None = None  # an open lower end: value > above
    pattern: str = ""  # a word's form, as a regular expression
    form: str = ""  # ... and as the user reads it
    user_file: tuple = ()  # a user's file: the keys it is stored as (path, content hash, kind or None)

    @property
    def numeric(self) -> bool:
        return self.base in (int, float) and not self.choices

    def describe(self) -> str:
        if self.choices:
            one = "one of " + ", ".join(map(str, self.choices))
        elif self.form:
            one = self.form
        elif self.unit == "bytes":
            one = "a size in bytes (K/M/G suffixes allowed)"
        else:
            one = {int: "a whole number", float: "a number", bool: "true or false", str: "a word"}[self.base]
        if self.unit and self.unit != "bytes":
            one += f" ({self.unit})"
        one += self._range_text()
        return f"a comma-separated list of {_plural(one)}" if self.many else one

    def _range_text(self) -> str:
        def t(x: float) -> str:
            return _text(int(x) if float(x).is_integer() else x, self.unit)
        if self.above is not None:
            return f" above {t(self.above)}" + (f" and at most {t(self.high)}" if self.high is not None else "")
        if self.low is not None and self.high is not None:
            return f" from {t(self.low)} to {t(self.high)}"
        if self.low is not None:
            return f" of at least {t(self.low)}"
        if self.high is not None:
            return f" of at most {t(self.high)}"
        return ""

    def in_range(self, v: float) -> bool:
        if isinstance(v, float) and not math.isfinite(v):
            return False
        return not ((self.low is not None and v < self.low) or (self.high is not None and v > self.high)
                    or (self.above is not None and v <= self.above))

    def example(self, default: Any) -> str:
        if self.choices:
            picks = self.choices[: 2 if self.many else 1]
        elif isinstance(default, (tuple, list)) and default:
            picks = tuple(default)
        elif default is None:
            picks = ({int: 8, float: 1.5, bool: True, str: "x"}[self.base],)
        else:
            picks = (default,)
        return ",".join(_text(v, self.unit) for v in picks)


def _plural(s: str) -> str:
    for a, b in (("a whole number", "whole numbers"), ("a number", "numbers"), ("a word", "words"),
                 ("a block size", "block sizes"),
                 ("a size in bytes", "sizes in bytes"), ("one of", "values from")):
        if s.startswith(a):
            return b + s[len(a):]
    return s


def _text(v: Any, unit: str) -> str:
    if unit == "bytes" and isinstance(v, int):
        from ..sizes import format_size
        return format_size(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def kinds(cls: type) -> dict[str, Kind]:
    """Each field of a Params dataclass, by name, in declaration order."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        t, optional, many = hints[f.name], False, False
        if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
            args = [a for a in typing.get_args(t) if a is not type(None)]
            optional, t = True, args[0]
        if typing.get_origin(t) is tuple:
            many, t = True, typing.get_args(t)[0]
        md = f.metadata
        out[f.name] = Kind(t, many, optional, md.get("unit", ""), md.get("choices", ()), md.get("per_case", ""),
                           md.get("low"), md.get("high"), md.get("above"), md.get("pattern", ""), md.get("form", ""),
                           md.get("user_file", ()))
    return out


class BadValue(ValueError):
    pass


def _one(kind: Kind, v: Any) -> Any:
    if kind.base is UserFile:
        if isinstance(v, UserFile):
            return v
        raise BadValue
    if kind.base is bool:
        if isinstance(v, bool):
            return v
        if isinstance(v, int) and v in (0, 1):
            return bool(v)
        if isinstance(v, str) and v.strip().lower() in ("true", "yes", "on", "1", "false", "no", "off", "0"):
            return v.strip().lower() in ("true", "yes", "on", "1")
        raise BadValue
    if kind.base is int:
        if isinstance(v, bool):
            raise BadValue
        if isinstance(v, int):
            out = v
        elif isinstance(v, float) and v.is_integer():
            out = int(v)
        elif isinstance(v, str):
            from ..sizes import parse_size
            try:
                out = parse_size(v) if kind.unit == "bytes" else int(v.strip())
            except (FlashbedError, ValueError):
                raise BadValue from None
        else:
            raise BadValue
    elif kind.base is float:
        if isinstance(v, bool):
            raise BadValue
        if isinstance(v, (int, float)):
            out = v  # an int stays an int: stored results show the value as given
        elif isinstance(v, str):
            try:  # "60" stays the whole number it reads as, as a profile's 60 does
                out = int(v.strip()) if re.fullmatch(r"\s*[+-]?\d+\s*", v) else float(v)
            except ValueError:
                raise BadValue from None
        else:
            raise BadValue
    else:  # str
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise BadValue
        out = str(v)
        if kind.pattern and not re.fullmatch(kind.pattern, out):
            raise BadValue
    if kind.choices and out not in kind.choices:
        raise BadValue
    if kind.numeric and not kind.in_range(out):
        raise BadValue
    return out


def convert(kind: Kind, v: Any) -> Any:
    """One value of a field, from what a profile or the command line gave; BadValue if it cannot be."""
    if v is None:
        if kind.optional:
            return None
        raise BadValue
    if not kind.many:
        return _one(kind, v)
    if isinstance(v, str):
        v = [s.strip() for s in v.split(",")]
        if not all(v):  # "4k," or ",": a value left out, not nothing
            raise BadValue
    elif not isinstance(v, (list, tuple)):
        v = [v]
    if not v:
        raise BadValue
    return tuple(_one(kind, x) for x in v)


def check(study: str, cls: type, values: dict[str, Any], *, edge: bool = False) -> Any:
    """A Params of `cls` with `values` over its defaults; one clear line on a bad key or value.
    At the edge (profiles, --set) the fields a study sets per case are not given by hand."""
    ks = kinds(cls)
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    values = _user_files(study, ks, values)
    out = {}
    for key, v in values.items():
        # what --set can change: not a user's file (its option sets it), not a field with one value only
        settable = [k for k, kind in ks.items() if not (edge and kind.per_case) and not kind.user_file
                    and len(kind.choices) != 1]
        if key not in ks:
            valid = ", ".join(settable) or "(none: this study has no parameters)"
            set_by = [(f.name, f.metadata["set_by"]) for f in dataclasses.fields(cls) if f.metadata.get("set_by")]
            by = " (" + "; ".join(f"{name}: set by {option}" for name, option in set_by) + ")" if set_by else ""
            raise FlashbedError(f"unknown parameter '{key}' for study {study}: choose from {valid}{by}")
        if edge and ks[key].per_case:
            raise FlashbedError(f"{study}.{key} is set per case, from {study}.{ks[key].per_case}: "
                                f"set that instead, e.g. --set {study}.{ks[key].per_case}={v}")
        try:
            out[key] = convert(ks[key], v)
        except BadValue:
            k = ks[key]
            shown = ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)
            raise FlashbedError(f"bad value '{shown}' for {study}.{key}: expected {k.describe()}, "
                                f"e.g. --set {study}.{key}={k.example(defaults[key])}") from None
    return cls(**out)


def _user_files(study: str, ks: dict[str, Kind], values: dict[str, Any]) -> dict[str, Any]:
    """`values` with each user file's stored keys (a request's, a result's) made its UserFile."""
    out = dict(values)
    for name, kind in ks.items():
        if not kind.user_file or isinstance(out.get(name), UserFile):
            continue
        path_key, digest_key, kind_key = kind.user_file
        if not any(k in out for k in kind.user_file if k):
            continue
        path, digest = out.pop(path_key, ""), out.pop(digest_key, "")
        what = out.pop(kind_key, FileKind.SCRIPT) if kind_key else FileKind.SCRIPT
        if what not in tuple(FileKind):
            raise FlashbedError(f"bad value '{what}' for {study}.{kind_key}: expected one of {', '.join(FileKind)}")
        out[name] = UserFile(str(path), FileKind(what), str(digest)) if path else None
    return out


def stored(cls: type) -> tuple[str, ...]:
    """The names a request and a result store a Params' values under (a user file's keys)."""
    return tuple(k for name, kind in kinds(cls).items() for k in (kind.user_file or (name,)) if k)


def text(v: Any, unit: str) -> str:
    """A value (or a tuple of them) as --set takes it."""
    return ",".join(_text(x, unit) for x in v) if isinstance(v, tuple) else _text(v, unit)


def as_json(p: Any) -> dict[str, Any]:
    """The parameters as stored in a result's provenance (every field, tuples as lists; a user
    file as its keys)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(p):
        v = getattr(p, f.name)
        if f.metadata.get("user_file"):
            out.update(_file_keys(f.metadata["user_file"], v))
        else:
            out[f.name] = list(v) if isinstance(v, tuple) else v
    return out


def _file_keys(keys: tuple[str, str, str | None], v: UserFile | None) -> dict[str, str]:
    path_key, digest_key, kind_key = keys
    out = {path_key: v.path if v else "", digest_key: v.digest if v else ""}
    return out | ({kind_key: str(v.kind if v else FileKind.SCRIPT)} if kind_key else {})


def describe(cls: type) -> list[str]:
    """One line per parameter: name, default, unit, what it takes (for `flashbed studies`)."""
    lines = []
    for f, (name, k) in zip(dataclasses.fields(cls), kinds(cls).items()):
        if k.per_case:
            continue
        if k.user_file:
            what = "path, content hash and kind" if k.user_file[2] else "path and content hash"
            lines.append(f"{name}=  {f.metadata['help']}: set by {f.metadata['set_by']} (its {what}, in the run id)")
            continue
        default = ",".join(_text(x, k.unit) for x in f.default) if isinstance(f.default, tuple) else \
            ("(from the device)" if f.default is None else _text(f.default, k.unit))
        lines.append(f"{name}={default}  {k.describe()}" + (f": {f.metadata['help']}" if f.metadata.get("help")
                                                             else ""))
    return lines
