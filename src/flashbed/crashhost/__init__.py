"""The host's side of crash states, in one place (the guest's is lab/guest/crashstates.py,
trees.py and sequences.py). A crash-state cell's life, and the module that does each part:

  list    the guest's workload ran with the device's write log on; the host asks the emulator
          for the crash states after its first mark, each with its image class (host.py:
          CrashHost.crash_states, Call.CRASH_STATES)
  plan    which of them the labs check: each distinct state once, and under `max_states` a
          seeded stratified sample with the coverage it gives (plan.py)
  claim   each state to exactly one lab, an O_EXCL file per state (claims.py)
  serve   the next unclaimed state served to the lab that asks (host.py: Call.CRASH_NEXT,
          Call.CRASH_SWITCH; a watchdog kills a lab stuck on one)
  check   the recovery's fsck run here on the served state, the same program on the same bytes
          (check.py: Call.CRASH_CHECK); the repair stays in the lab; the user's check may run
          here too, in a sandbox, on a copy of the recovered directory (sandbox.py); its verdicts kept
          for the whole run, taken by any cell's check that would see the same (verdicts.py), by the
          tree's contents where the check's words provably read no metadata (checkwords.py)
  share   helper labs offered to the executor take claims from the cell's kept write log; the
          cell waits for them and share.json says how each lab ended (share.py; the helper's
          task is cell.help_check, beside cell_task)
  record  every lab's verdicts and end records read back (share.records, share.read_end_records),
          and the states not checked themselves given their representative's
          (plan.shared_verdicts): the study's parse (studies/crashstates.py) makes the cell's result

The studies import this wing; it imports nothing above the studies' kit (studies/base.py).
"""
