"""Replay worker: `python .../collcheck/replay/worker.py PLAN.json` as one rank (RANK, WORLD_SIZE, MASTER_*).

Run as a script, not with `-m`: then no frame of runpy sits below the replayed calls and a
recorder attributes calls without a recorded site to no user frame, as in the original.
"""

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
