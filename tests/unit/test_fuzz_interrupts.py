"""Issue 42, the guard fuzz's class "interrupts of every command followed by a leftover scan":
commands that boot no lab (results, report into the run and elsewhere, probe --out a user's
file, bench clock --keep, a run refused at the edge after its mkfs ran for the space check),
each sent SIGINT (to its process group, as Ctrl-C), SIGTERM or SIGKILL at a random moment; then
nothing of theirs may be left: no ~/.uml entry, no process, no mount, no file changed outside
the command's own output (a canary beside it, the run's results it reads), and no flashbed-*
in the temporary directory once one more command ran (a SIGKILLed flashbed cannot remove its
own: the next one does).

A few interrupts in every `make test` (one per command, the signals in turn);
FLASHBED_INTERRUPT_CASES=N runs N from a fresh seed. The lab's commands are interrupted 50 times
by `flashbed bench leftovers` (docs/architecture.md, Testing)."""

from __future__ import annotations

import os
import random

from flashbed.bench import leftovers
from tests.fixtures.report import make_runs as gen

MORE = int(os.environ.get("FLASHBED_INTERRUPT_CASES", "0"))
CASES = MORE or len(leftovers.CHEAP)
SEED = random.randrange(1 << 30) if MORE else 42


def test_interrupted_commands_leave_nothing_behind(tmp_path, capsys):
    said: list[str] = []
    during, final = leftovers.scan(leftovers.CHEAP, CASES, SEED, tmp_path, leftovers.flashbed_command(),
                                   lambda where: gen.make_run(where), said.append)
    assert len(said) == CASES
    assert leftovers.failed(during, final) == 0, (SEED, during.counts, final.counts, final.examples + during.examples)
    with capsys.disabled():
        print(f"\ninterrupt fuzz (seed {SEED}): {CASES} commands interrupted, nothing left "
              f"({sum(1 for s in said if 'ended by itself' not in s)} before they ended; a killed flashbed's "
              f"temporary directories removed by the next: {during.counts['flashbed-* in tmp']})")
