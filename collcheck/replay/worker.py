"""Replay worker: `python .../collcheck/replay/worker.py PLAN.json` as one rank (RANK, WORLD_SIZE, MASTER_*).

Run as a script, not with `-m`: then no frame of runpy sits below the replayed calls and a
recorder attributes calls without a recorded site to no user frame, as in the original.
"""

import atexit
import json
import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        sys.path.pop(0)  # never shadow stdlib or torch modules with this package's files
    from collcheck.replay import runtime

    with open(sys.argv[1]) as f:
        plan = json.load(f)
    runtime.main(plan)
    # The replay is done. torch 2.13's gloo now and then aborts a process while the interpreter
    # tears it down ("terminate called without an active exception", without collcheck too),
    # which would turn a finished replay into a crashed rank: run the exit handlers (a
    # recorder's trailer), then leave without the teardown.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
