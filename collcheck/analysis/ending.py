"""Which rank went first when a job died, from the evidence each rank left, never assumed.

When a rank dies, torchrun sends SIGTERM to the others: the recorder has faulthandler dump their
stacks beside the log then (capture/watchdog.py, `<log>.sigterm.txt`). A rank killed by SIGKILL
(the out-of-memory killer, a scheduler) leaves no such dump, and its log no trailer. So among the
ranks killed from outside, those without SIGTERM stacks went first when others have them, or
when others failed because a peer went away after these ranks' last sign of life; of several,
the one whose last sign of life is earliest. Without such evidence nobody is named first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import Run, rank_ranges

KILLED = frozenset(("killed", "killed-in-collective", "stuck"))  # ended by a signal from outside


@dataclass
class KillOrder:
    first: list[int] = field(default_factory=list)  # went first: killed without SIGTERM stacks
    launcher: list[int] = field(default_factory=list)  # SIGTERM, stacks dumped: stopped after a rank went


def last_sign_of_life(log) -> int | None:
    """The latest time (wall µs) the rank's log shows it alive: its last collective's issue, return
    or completion (a rank blocked in it was alive after, until it was killed)."""
    n = len(log)
    if not n:
        return None
    e = log.event(n - 1)
    return max(t for t in (e.t_issue, e.t_return, e.t_done) if t is not None)


def sigterm_stacks(log) -> bool:
    """The rank's stacks were dumped at SIGTERM (a fatal signal's dump is a crash, not that)."""
    return bool(log.sigterm_dump) and log.crash is None


def kill_order(run: Run, states: dict[int, str]) -> KillOrder:
    """Who went first and who the launcher stopped after, from the ranks' end states (rank ->
    state, analysis/hang.py) and what their logs and dumps hold."""
    killed = [r for r, st in states.items() if st in KILLED and r in run.ranks]
    launcher = sorted(r for r in killed if sigterm_stacks(run.ranks[r]))
    hard = {r: last_sign_of_life(run.ranks[r]) for r in killed if r not in launcher}
    hard = {r: t for r, t in hard.items() if t is not None}
    if not hard:
        return KillOrder([], launcher)
    earliest = min(hard.values())
    lost = [last_sign_of_life(run.ranks[r]) for r, st in states.items() if st == "peer-lost" and r in run.ranks]
    # (a peer-lost rank failed after a peer went: one alive after that failure did not go first)
    after = launcher or (lost and all(t is not None and t >= earliest for t in lost))
    if not after:
        return KillOrder([], launcher)
    return KillOrder(sorted(r for r, t in hard.items() if t == earliest), launcher)


def killed_words(rank: int, state: str, order: KillOrder) -> str:
    """How a rank killed from outside ended, in the words the evidence allows."""
    inside = " inside the collective" if state == "killed-in-collective" else ""
    if rank in order.first:
        return f"was killed first{inside}, without SIGTERM stacks (SIGKILL: the out-of-memory killer, a scheduler)"
    if rank in order.launcher:
        after = f"after rank{'s' if len(order.first) != 1 else ''} {rank_ranges(order.first)} went" if order.first \
            else "after another rank failed or was killed"
        return f"was stopped by the launcher (SIGTERM: its stacks were dumped) {after}"
    if state == "killed-in-collective":
        return ("was killed while it waited (no SIGTERM stacks say by whom: a SIGKILL, or a launcher stopping it "
                "after another rank failed)")
    return "was killed"


def end_detail(rank: int, state: str, order: KillOrder) -> str:
    """What the final state's detail adds for a rank named by the kill order ('' otherwise)."""
    if rank in order.first:
        return "went first: killed without SIGTERM stacks (SIGKILL: the out-of-memory killer, a scheduler)"
    if rank in order.launcher and order.first:
        return f"stopped by the launcher (SIGTERM) after rank{'s' if len(order.first) != 1 else ''} " \
               f"{rank_ranges(order.first)} went"
    return ""
