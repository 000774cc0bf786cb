"""One table entry: what a framework function's collective is for, and the fix, in its own terms.

Tables are keyed by (file relative to site-packages, qualified name): the chain keeps only a
frame's file and function name (`co_name`), so the qualified name's last part is what matches
and the rest (the class) is for people ("ModelCheckpoint.file_exists").

Which entry names a collective when several frames of a chain have one: the highest `level`,
and among equals the outermost (the call closest to the user's code). The levels say how much
an entry explains:
- WIRE: a transport wrapper (`deepspeed.comm`'s backend methods): names the op only.
- HELPER: a generic collective helper, often called by other framework code (Lightning's
  strategy `barrier`/`reduce`, accelerate's `gather`): what the user called when nothing more
  specific is around it.
- CALL: a feature whose collective has one purpose (`self.log(..., sync_dist=True)`,
  `gather_for_metrics`, the SIGTERM flag): names it even when reached through helpers.
- PURPOSE: a phase that owns every collective under it (a checkpoint save: its barriers and
  gathers are all the save's).
`via`: the entry applies only when the next frame inward (decorator frames skipped) is one of
these functions (None: the frame issues the collective itself, torch below it), for a function
that does several things (the Trainer's evaluation loop gathers predictions, and also runs the
model's forward).
"""

from __future__ import annotations

from dataclasses import dataclass

WIRE, HELPER, CALL, PURPOSE = 0, 10, 20, 30
ANY = "*"  # a table key's function for every function of that file (transport wrappers)


@dataclass(frozen=True)
class Entry:
    words: str  # what the collective is for ("{func}" is the frame's function, for ANY keys)
    fix: str  # the fix in the framework's terms
    user_api: str | None = None  # the public call that led here; None: the call the chain entered the framework by
    level: int = CALL
    at: int | tuple = ()  # the cited version's line(s) in this function that issue or lead to the collective
    via: tuple = ()  # callee function names this entry applies to; empty: any
    ends_training: bool = False  # issued once the training loop has ended (blame: a rank that stopped early)
    after_loop: bool = False  # issued where a loop over batches has ended (an epoch's end, an evaluation)

    def applies(self, callee: str | None) -> bool:
        return not self.via or callee in self.via

    @property
    def lines(self) -> tuple:
        return self.at if isinstance(self.at, tuple) else (self.at,)
