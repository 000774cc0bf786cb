"""The words every view uses for what the analysis found: an event as a cell, the ranks' final
state, the wait-for graph. The text report and the TUI both build on these, so that a user reads
the same string for the same thing in either (sites and chains: knowledge/sites.py).

Only strings and plain tuples here: how they are laid out (a table, a wrapped cell, a Textual
widget) is each view's own. Every string from the logs goes through `one_line`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.fold import fold_identical
from ..base.untrusted import one_line
from ..knowledge import sites
from ..knowledge.frameworks import split_chain
from ..model import P2P_OPS, rank_ranges

# a rank's final state (analysis/hang.py's RankState.state) in words
STATES = {
    "finished": "finished", "raised": "raised an exception", "crashed": "crashed",
    "timed-out": "timed out in a collective", "stuck": "stuck (per watchdog)",
    "killed-in-collective": "killed while in collective", "killed": "killed", "peer-lost": "lost a peer",
    "collective-failed": "a collective failed", "missing-log": "no log", "dumped": "dumped its Flight Recorder",
    "waiting-at-dump": "waiting in a collective at its dump", "running": "running",
    "running-in-collective": "running, inside a collective",
    "damaged": "log damaged: its end is not known", "recording-stopped": "recording stopped: its end is not known",
}
PENDING, FAILED = "⏳", "✗"  # an event not completed, one that raised


def state_words(state: str) -> str:
    return STATES.get(state, one_line(state))


def event_words(e) -> str:
    """'broadcast bfloat16[2x3] root 1': the call, its tensors as issued, its root or peer and tag."""
    s = e.sig
    shape = ",".join(f"{d}[{'x'.join(map(str, sh))}]" for d, sh in e.sized.tensors) + e.splits_text()
    extra = f" {'peer' if s.op in P2P_OPS else 'root'} {s.root}" if s.root is not None else ""
    if s.tag:
        extra += f" tag {s.tag}"
    return one_line(f"{s.api or s.op} {shape}{extra}".replace("  ", " ").strip())


def event_state(e) -> str:
    """'' for a completed event, else its mark: still pending, or raised."""
    return "" if e.completed else f" {FAILED}" if e.error else f" {PENDING}"


def event_site(e) -> str:
    """Where the user can change the call (knowledge/sites.user_site): the same in every view."""
    return sites.user_site(e.site, e.chain)


def chain_words(e, width: int = 120) -> list[str]:
    """An event's call chain as lines, outermost first: the program's own frames on one line
    (knowledge/sites.chain_line), or with frameworks, their frames folded a line each
    (knowledge/sites.chain_lines) and then what the framework was doing, in its words."""
    view = split_chain(e.chain) if e.chain and len(e.chain) > 1 else None
    if view is None or not view.folds:
        return [sites.chain_line(e.chain, e.site)]
    lines = sites.chain_lines(view.chain, max(40, width))
    return lines + ([f"= {one_line(view.call.words)}"] if view.call is not None else [])


def event_label(e) -> str:
    return one_line(e.label) if e.label else ""


def blocked_words(e) -> str:
    """'all_reduce float32[4] #12 of group 0': what a rank was blocked in."""
    return one_line(f"{e.describe()} #{e.position} of group {e.group}") if e is not None else ""


@dataclass(frozen=True)
class FinalState:
    """One row of the final-state table: ranks folded by identical words."""

    ranks: str
    state: str  # the state's words
    host: str  # where they ran, when the run spans hosts ('' on one host)
    blocked: str  # what they were blocked in
    detail: str
    raw: str  # the state's name (for a view's colour)


def final_states(report, most: int | None = None) -> list[FinalState]:
    """Every rank's end, folded (by host too, when the run spans hosts: which node is stuck):
    the same rows in the report's table and the TUI's overview."""
    run = report.run
    by_host = len(run.hosts) > 1
    rows = {r: (one_line(run.host_of(r) or "?", 80) if by_host else "", s.state,
                blocked_words(s.blocked[0]) if s.blocked else "", one_line(s.detail))
            for r, s in report.hang.states.items()}
    folded = fold_identical(rows)
    return [FinalState(rank_ranges(ranks), state_words(state), host, blocked, detail, state)
            for ranks, (host, state, blocked, detail) in folded[:most]]


def completion_words(run) -> str:
    """How completion times were seen, where the backend's futures cannot say (NCCL): '' otherwise."""
    ms = run.poll_ms
    if ms is None:
        return ""
    return (f"completion times polled every {ms:g} ms (is_completed(): the backend's futures complete at enqueue), "
            f"so each is up to {ms:g} ms late")


def host_lines(report, most: int = 16) -> list[str]:
    """On a run over several hosts, each host whose ranks all ended alike, in a sentence ('all 8
    ranks of node-17 are timed out in a collective, in all_reduce float32[4] #412 of group 0'):
    which node to look at. Empty on one host."""
    run = report.run
    if len(run.hosts) < 2:
        return []
    by_host: dict[str, list[int]] = {}
    for r in report.hang.states:
        by_host.setdefault(run.host_of(r) or "?", []).append(r)
    lines = []
    for host, ranks in sorted(by_host.items()):
        ends = {(s.state, blocked_words(s.blocked[0]) if s.blocked else "")
                for s in (report.hang.states[r] for r in ranks)}
        if len(ends) == 1 and len(ranks) > 1:
            (state, blocked), = ends
            lines.append(f"all {len(ranks)} ranks of {one_line(host, 80)} ({rank_ranges(ranks)}): {state_words(state)}"
                         + (f", in {blocked}" if blocked else ""))
    return lines[:most]


@dataclass(frozen=True)
class Wait:
    """Ranks that wait, in one group and one collective, on other ranks."""

    ranks: list[int]
    group: str
    blocked: str
    targets: list[int]
    in_cycle: bool

    def words(self) -> str:
        return (f"rank{'s' if len(self.ranks) > 1 else ''} {rank_ranges(self.ranks)} wait"
                f"{'s' if len(self.ranks) == 1 else ''} in group {self.group}"
                + (f" ({self.blocked})" if self.blocked else "")
                + f" on rank{'s' if len(self.targets) > 1 else ''} {rank_ranges(self.targets)}"
                + ("  ⟲ cycle" if self.in_cycle else ""))


def waits(report, most: int | None = None) -> list[Wait]:
    """The wait-for graph's edges, ranks that wait alike folded: the report's and the TUI's."""
    hang = report.hang
    cyc_edges = {(c[i], c[(i + 1) % len(c)]) for c in hang.cycles for i in range(len(c))}
    by_rank: dict[int, dict] = {}
    for a, b, d in hang.graph.edges(data=True):
        key = (one_line(d.get("group")), blocked_words(d.get("event")))
        by_rank.setdefault(a, {}).setdefault(key, []).append(b)
    rows = {a: tuple(sorted((key, tuple(sorted(v))) for key, v in w.items())) for a, w in by_rank.items()}
    out = []
    for ranks, w in fold_identical(rows):
        for (group, blocked), targets in w:
            out.append(Wait(list(ranks), group, blocked, list(targets),
                            any((a, b) in cyc_edges for a in ranks for b in targets)))
    return out[:most]


def cycle_words(report, cycle: list[int]) -> str:
    """'rank 0 (group 1) → rank 1 (group 0) → rank 0'."""
    edges = report.hang.graph.edges
    hops = " → ".join(f"rank {a} (group {one_line(edges[a, b]['group'])})" for a, b in zip(cycle, cycle[1:] + cycle[:1]))
    return f"{hops} → rank {cycle[0]}"
