"""The options of `flashbed run` that studies take (Study.inputs), checked at the edge.

An input reads what the user gives once (a file with userwork.load's checks, a number against
the range its study's Params declare) and sets the parameters of each study that takes it; a
study that takes a given input joins the run when it says so (Study.joins). The run command's
"your workload" options are these (ALL, in that order); report/rerun.py writes them back
from a run's stored parameters. What the options given make of every study's parameters, and
a resume's check of the files they named, are edge.py's (they read the studies' registry).
Neither the run command nor userwork.py names a study.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import FlashbedError
from . import params as P

# the lifetime phase's passes of the workload that --age implies (unless --set workload.passes=N)
AGE_PASSES = 6


@dataclass(frozen=True)
class Input:
    """One option a study takes."""

    option: str
    metavar: str
    help: str
    needs: str = ""  # the input this one applies to (one line when it is given alone)
    type: Any = None  # argparse's reading of the value (None: the text)

    @property
    def dest(self) -> str:
        return self.option.lstrip("-").replace("-", "_")

    @property
    def brings(self) -> dict[str, Any]:
        """Parameters it sets beside its own, each under a --set of it."""
        return {}

    def value(self, text: Any) -> Any:
        """The value the user gave, checked (one line if it is wrong)."""
        return text

    def params(self, study: Any, value: Any) -> dict[str, Any]:
        """The study's parameters this input sets, as a request stores them."""
        raise NotImplementedError

    def argv(self, study: Any, values: dict[str, Any]) -> tuple[list[str], tuple[str, ...]]:
        """The option as a command gives it back from the study's stored parameters (no words
        where they hold none), and the parameters it stands for."""
        raise NotImplementedError


@dataclass(frozen=True)
class FileInput(Input):
    """A user's file: the study's parameter declared with P.user_file(set_by this option)."""

    fio_allowed: bool = True

    def value(self, text: Any) -> Any:
        from .. import userwork
        return userwork.load(text, self.option, fio_allowed=self.fio_allowed)

    def _field(self, study: Any) -> tuple[str, str, str | None]:
        return next(k.user_file for f, k in zip(dataclasses.fields(study.Params), P.kinds(study.Params).values())
                    if k.user_file and f.metadata["set_by"].split()[0] == self.option)

    def params(self, study: Any, value: Any) -> dict[str, Any]:
        return P._file_keys(self._field(study), value)

    def argv(self, study: Any, values: dict[str, Any]) -> tuple[list[str], tuple[str, ...]]:
        keys = tuple(k for k in self._field(study) if k)
        return ([self.option, str(values[keys[0]])] if values.get(keys[0]) else []), keys


@dataclass(frozen=True)
class SettingInput(Input):
    """A number for one parameter, in the range the study's Params declare; 0 is no value (the
    parameter's default). `ask`: what the line says on a bad value ({low} and {high}: the range)."""

    param: str = ""
    ask: str = ""
    beside: dict[str, Any] = field(default_factory=dict)

    @property
    def brings(self) -> dict[str, Any]:
        return self.beside

    def checked(self, study: Any, value: Any) -> Any:
        kind = P.kinds(study.Params)[self.param]
        try:
            v = P.convert(kind, value)
        except P.BadValue:
            v = 0
        if not v:
            low = kind.low if kind.low else 1
            raise FlashbedError(f"{self.option} {value}: " + self.ask.format(low=_num(low), high=_num(kind.high)))
        return v

    def params(self, study: Any, value: Any) -> dict[str, Any]:
        return {self.param: self.checked(study, value)}

    def argv(self, study: Any, values: dict[str, Any]) -> tuple[list[str], tuple[str, ...]]:
        if not values.get(self.param):
            return [], ()
        return [self.option, str(values[self.param])], \
            (self.param, *(k for k, v in self.brings.items() if values.get(k) == v))


def _num(x: Any) -> str:
    return str(int(x)) if isinstance(x, float) and x.is_integer() else str(x)


WORKLOAD = FileInput("--workload", "FILE", "your own workload: a fio job file (.fio) or an executable script (run "
                     "with $FLASHBED_MNT, the filesystem under test, as its working directory)")
CHECK = FileInput("--check", "FILE", "with --workload: an executable run after recovery in every crash state of the "
                  "workload (exit 0: your data is consistent)", needs="--workload", fio_allowed=False)
AGE = SettingInput("--age", "FILL", "with --workload: fill the filesystem to FILL %% with a file population and "
                   "churn it first, then run the workload as a lifetime phase (6 passes unless --set "
                   "workload.passes=N)", needs="--workload", type=int, param="fill",
                   ask="give the fill in % of the filesystem, {low} to {high}", beside={"passes": AGE_PASSES})
DAILY = SettingInput("--daily-writes", "SIZE", "with --workload: host writes a day for the projected lifetime, e.g. "
                     "2G (default: the workload's measured rate, around the clock)", needs="--workload",
                     param="daily_writes", ask="give a size a day, e.g. 2G or 500M")
ALL: tuple[Input, ...] = (WORKLOAD, CHECK, AGE, DAILY)  # in `flashbed run --help`'s order


def argv(study: Any, values: dict[str, Any], have: list[str]) -> tuple[list[str], dict[str, Any]]:
    """A study's stored parameters as its inputs' options (those not in `have` yet), and the
    parameters left for --set."""
    args: list[str] = []
    left = dict(values)
    for inp in study.inputs:
        words, keys = inp.argv(study, values)
        if words and inp.option not in have + args:
            args += words
        for k in keys:
            left.pop(k, None)
    return args, left
