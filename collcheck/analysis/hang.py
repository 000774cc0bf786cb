"""Final state of every rank and the wait-for graph of a hang (MUST-style AND arcs).

A rank blocked in a collective waits on every member of that group that has not
issued the same position; a rank blocked in a recv waits on its source. Ranks that
are waited on but wait on nobody (exited, crashed, computing) are the root causes;
a cycle across groups is a deadlock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from ..model import P2P_OPS, Run
from .findings import Finding

TIMEOUT_WORDS = ("timed out", "timeout", "Timed out")


@dataclass
class RankState:
    rank: int
    state: str  # finished | raised | stuck | killed-in-collective | killed | timed-out | missing-log
    blocked: list = field(default_factory=list)  # events it was waiting in at the end
    detail: str = ""


@dataclass
class HangAnalysis:
    states: dict[int, RankState]
    graph: nx.DiGraph
    cycles: list[list[int]]
    root_causes: list[int]
    waiting: set[int]


def blocked_events(run: Run, rank: int) -> list:
    """Events the rank never completed, or that failed (timeout, connection reset)."""
    log = run.ranks[rank]
    return [log.event(i) for i in sorted(log.pending | set(log.errors))]


def final_states(run: Run) -> dict[int, RankState]:
    states = {}
    for rank in range(run.world):
        log = run.ranks.get(rank)
        if log is None:
            states[rank] = RankState(rank, "missing-log")
            continue
        blocked = blocked_events(run, rank)
        state = log.state
        detail = ""
        if log.exception is not None:
            detail = f"{log.exception[0]}: {log.exception[1]}".splitlines()[0][:200]
            if any(e.error for e in blocked):
                state = "timed-out"
        elif log.watchdog:
            w = log.watchdog[-1]
            detail = f"stuck {w.get('waited_s')} s in {w.get('op')} (watchdog stacks recorded)"
        states[rank] = RankState(rank, state, blocked if state != "finished" else [], detail)
    return states


def analyse_hang(run: Run) -> HangAnalysis:
    states = final_states(run)
    g = nx.DiGraph()
    g.add_nodes_from(states)
    waiting = {r for r, s in states.items() if s.blocked and s.state != "finished"}
    counts: dict[tuple[int, str], int] = {}
    for rank, log in run.ranks.items():
        for name, idx in log.by_group.items():
            counts[(rank, name)] = len(idx)
    for rank in sorted(waiting):
        for ev in states[rank].blocked:
            if ev.sig.op in P2P_OPS:
                members = run.group_members(ev.group)
                peer = members[ev.sig.root] if ev.sig.root is not None and ev.sig.root < len(members) else None
                if peer is not None and peer != rank:
                    g.add_edge(rank, peer, group=ev.group, event=ev)
                continue
            for other in run.group_members(ev.group):
                if other != rank and counts.get((other, ev.group), 0) <= ev.position:
                    g.add_edge(rank, other, group=ev.group, event=ev)
    cycles = []
    for cyc in nx.simple_cycles(g):
        groups = {g.edges[cyc[i], cyc[(i + 1) % len(cyc)]]["group"] for i in range(len(cyc))}
        if len(cyc) > 1 and len(groups) > 1:
            cycles.append(cyc)
        if len(cycles) >= 10:
            break
    roots = sorted(r for r in g.nodes if r not in waiting and g.in_degree(r) > 0)
    return HangAnalysis(states, g, cycles, roots, waiting)


def hang_findings(run: Run, hang: HangAnalysis) -> list[Finding]:
    if not hang.waiting:
        return []
    first_rank = min(hang.waiting, key=lambda r: (hang.states[r].blocked[0].t_issue, r))
    ev = hang.states[first_rank].blocked[0]
    events = {r: (hang.states[r].blocked[0] if hang.states[r].blocked else None) for r in hang.states
              if r in run.ranks}
    last = max((e.t_issue for s in hang.states.values() for e in s.blocked), default=ev.t_issue)
    out = []
    for cyc in hang.cycles:
        groups = [hang.graph.edges[cyc[i], cyc[(i + 1) % len(cyc)]]["group"] for i in range(len(cyc))]
        out.append(Finding("deadlock", groups[0], ev.position, sorted(cyc), "", events, None,
                           {"cycle": list(cyc), "groups": groups}, last + 1))
    if not out:
        out.append(Finding("hang", ev.group, ev.position, hang.root_causes or sorted(hang.waiting), "", events,
                           None, {"waiting": sorted(hang.waiting), "root_causes": hang.root_causes,
                            "edges": [[a, b] for a, b in hang.graph.edges]}, last + 1))
    return out
