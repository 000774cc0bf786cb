"""Final state of every rank and the wait-for graph of a hang (MUST-style AND arcs).

A rank blocked in a collective waits on every member of that group that has not
issued the same position; a rank blocked in a recv waits on its source. Ranks that
are waited on but wait on nobody (exited, crashed, computing) are the root causes;
a cycle (across groups, or through point-to-point waits) is a deadlock.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import networkx as nx

from ..knowledge import sites
from ..model import P2P_OPS, Run, Sequences, rank_ranges
from .channels import Channels
from .ending import KillOrder, end_detail, kill_order, killed_words
from .findings import Finding

TIMEOUT_WORDS = ("timed out", "timeout", "Timed out")
PEER_LOST_WORDS = ("closed by peer", "reset by peer", "Broken pipe", "Connection refused")
# at the end, these ranks were waiting on others (blocked until a timeout or a kill, or failed
# because a peer went away: under NCCL they would have kept waiting)
# ('waiting-at-dump': a Flight Recorder dump shows a collective enqueued and never completed;
# 'running-in-collective': the log of a process still running, inside a collective)
SNAPSHOT_WAITING = frozenset(("waiting-at-dump", "running-in-collective"))
WAITING_STATES = frozenset(("stuck", "timed-out", "killed-in-collective", "peer-lost")) | SNAPSHOT_WAITING
HUNG_STATES = WAITING_STATES - {"peer-lost"}


@dataclass(slots=True)
class RankState:
    rank: int
    # finished | raised | crashed | stuck | killed-in-collective | killed | timed-out | peer-lost |
    # collective-failed | missing-log | dumped | waiting-at-dump | running | running-in-collective |
    # damaged | recording-stopped
    state: str
    blocked: list = field(default_factory=list)  # events it was waiting in at the end
    detail: str = ""
    # not completed either, but enqueued behind a blocked one of the same group (or P2P channel):
    # waiting for it, not for a peer (under NCCL a rank runs ahead until something synchronizes)
    queued: list = field(default_factory=list)


@dataclass
class HangAnalysis:
    states: dict[int, RankState]
    graph: nx.DiGraph
    cycles: list[list[int]]
    root_causes: list[int]
    waiting: set[int]  # blocked at the end, waiting on others (WAITING_STATES): the wait-for graph
    order: KillOrder = field(default_factory=KillOrder)  # who went first, from the evidence (ending.py)

    @property
    def in_flight_only(self) -> bool:
        """A snapshot (a Flight Recorder dump, the logs of a running job) where the ranks still inside
        collectives wait on no one: every member had issued them (a running job, or a hang below
        collcheck's view)."""
        inside = self.inside
        return bool(inside) and not self.graph.number_of_edges() and all(
            self.states[r].state in SNAPSHOT_WAITING for r in inside)

    @cached_property
    def inside(self) -> set[int]:
        """Ranks that ended inside a collective they never completed (waiting, failed or crashed);
        found once (the states are final when the analysis is made; a world may be a million)."""
        return _inside(self.states)


def _inside(states: dict) -> set[int]:
    return {r for r, s in states.items() if s.blocked and s.state != "finished"}


def blocked_events(run: Run, rank: int) -> list:
    """Events the rank never completed, or that failed (timeout, connection reset)."""
    log = run.ranks[rank]
    if not log.pending and not log.errors:  # (most ranks: thousands ask)
        return []
    return [log.event(i) for i in sorted(log.pending | set(log.errors))]


def final_states(run: Run) -> dict[int, RankState]:
    states = {}
    streams = run.on_streams  # NCCL's watchdog aborts a rank whose collective timed out
    for rank in range(run.world):
        log = run.ranks.get(rank)
        if log is None:
            states[rank] = RankState(rank, "missing-log")
            continue
        blocked = blocked_events(run, rank)
        state = log.state
        detail = ""
        if state == "recording-stopped":
            detail = stopped_text(log)
        elif log.exception is not None:
            detail = f"{log.exception[0]}: {log.exception[1]}".splitlines()[0][:200]
            if not blocked:
                blocked = _raised_in_wait(run, log)
            elif not any(e.error for e in blocked):
                blocked = _failed_as_raised(log, blocked)
            errors = [e.error for e in blocked if e.error]
            if errors:
                state = _error_state(errors)
            site = log.exception[2] if len(log.exception) > 2 else None
            if site and state == "raised":  # where (a failed collective's site is shown already)
                detail = f"{detail[:160]} (raised at {sites.short(site)})"
        elif log.crash is not None:
            detail = log.crash
            if streams and any(e.error and any(w in e.error for w in TIMEOUT_WORDS) for e in blocked):
                # NCCL's watchdog: the collective timed out, then it took the process down
                state, detail = "timed-out", f"the watchdog aborted the process after the timeout ({detail})"
        elif log.watchdog:
            w = log.watchdog[-1]
            detail = f"stuck {w.get('waited_s')} s in {w.get('op')} (watchdog stacks recorded)"
        elif state == "killed" and log.dump_site is not None:
            detail = "killed " + where_killed(log)
        blocked, queued = split_queued(blocked) if state not in ("finished", "recording-stopped") else ([], [])
        states[rank] = RankState(rank, state, blocked, detail, queued)
    return states


def stopped_text(log) -> str:
    """'recording stopped after 1200 collectives: could not write the log: No space left on device
    (ENOSPC); unknown after that': a rank whose log says its recording stopped, neither waiting
    nor killed as far as anyone knows (and how its process ended, when the log has that too)."""
    n = len(log)
    text = f"recording stopped after {n} collective{'s' if n != 1 else ''}: {log.stopped}; unknown after that"
    if log.exception is not None:
        text += f"; the process then raised {log.exception[0]}"
    elif log.trailer:
        text += "; the process then exited normally"
    return text


def split_queued(events: list) -> tuple[list, list]:
    """Per group (per peer and op for P2P), the first event not completed is where the rank waits;
    the later ones were enqueued behind it and wait for it (a group runs its collectives in order,
    on one NCCL stream or gloo's work queue)."""
    blocked, queued, seen = [], [], set()
    for ev in events:
        key = (ev.group, ev.sig.op, ev.peer_global) if ev.sig.op in P2P_OPS else ev.group
        if key in seen and not ev.error:
            queued.append(ev)
        else:
            seen.add(key)
            blocked.append(ev)
    return blocked, queued


def _on_stream(log, blocked: list, queued: list, channels: Channels) -> str:
    """A rank whose collectives run on a stream (NCCL; a Flight Recorder dump): where its stream
    waited, and how far its CPU thread had gone on enqueueing, then where it waited (a sync point,
    when the log has it: a dump does not)."""
    n = len(log.sig)
    last = log.event(n - 1) if n else None
    if last is None:
        cpu = "its log holds no collective"
    else:
        at = "" if last.sig.op in P2P_OPS else f" (#{channels.collective_position(log.rank, last)} of group {last.group})"
        cpu = f"its CPU thread last enqueued {last.describe()}{at} at {last.where()}"
    if log.syncs:
        cpu += f", then waited{sync_text(log)}"
    if not blocked:
        return f"every collective it issued completed; {cpu}"
    first = blocked[0]
    text = f"its stream waits in #{first.position} of group {first.group} ({first.sig.api or first.sig.op})"
    if queued:
        text += f", {len(queued)} more enqueued behind it"
    return f"{text}; {cpu}"


def sync_text(log) -> str:
    """' at train.py:40 in main() (Tensor.item())': where the rank's CPU thread last waited for its
    stream (a sync point; "" when the log has none)."""
    if not log.syncs:
        return ""
    _, site, _, what = log.syncs[-1]
    where = f" at {sites.located(site)}" if site else ""
    return f"{where} ({what})"


def where_killed(log) -> str:
    """'while in f() at main.py:9', from the stacks dumped at SIGTERM: where a rank that was not in
    a collective spent its time (computing, checkpointing, loading data)."""
    return f"while in {sites.function_at(log.dump_site)}"


def _raised_in_wait(run: Run, log) -> list:
    """The async op a raised timeout or lost peer came from, when nothing is pending: gloo's
    P2P work has no future, so its completion is never recorded and the wait() that raised is
    not tied to it. The last such op issued at the raise site (`req = dist.irecv(...).wait()`),
    else the last such op; with the other ops of its batch_isend_irecv call."""
    text = log.exception[1]
    if not log.unconfirmed or not any(w in text for w in TIMEOUT_WORDS + PEER_LOST_WORDS):
        return []
    site = log.exception[2] if len(log.exception) > 2 else None
    recent = [log.event(i) for i in log.unconfirmed[-64:]]  # decoded once
    at_site = [e for e in recent if site is not None and e.site is not None and tuple(e.site[:2]) == tuple(site[:2])]
    found = (at_site or recent)[-1]
    if found.call_id is not None:  # batch_isend_irecv: the wait() may be on any op of the batch
        batch = [e for e in recent if e.call_id == found.call_id]
    else:
        batch = [found]
    return [replace(e, t_done=None, error=text[:2000]) for e in batch]  # they failed: the wait() raised


def _failed_as_raised(log, blocked: list) -> list:
    """A blocking collective still pending when the rank raised a timeout or a lost peer at its
    call site failed with that error: its completion callback (gloo's thread) may not have
    written it before the process went."""
    text, site = log.exception[1], (log.exception[2] if len(log.exception) > 2 else None)
    if site is None or not any(w in text for w in TIMEOUT_WORDS + PEER_LOST_WORDS):
        return blocked
    return [replace(e, error=text[:2000]) if not e.async_op and e.site is not None and tuple(e.site[:2]) == tuple(
        site[:2]) else e for e in blocked]


def _error_state(errors: list[str]) -> str:
    """How a rank's last collective failed: a timeout, a peer that went away, or the op itself."""
    text = " ".join(errors)
    if any(w in text for w in TIMEOUT_WORDS):
        return "timed-out"
    if any(w in text for w in PEER_LOST_WORDS):
        return "peer-lost"
    return "collective-failed"


def analyse_hang(run: Run, sequences: Sequences | None = None) -> HangAnalysis:
    states = final_states(run)
    order = kill_order(run, {r: st.state for r, st in states.items()})
    for rank, st in states.items():
        said = end_detail(rank, st.state, order)
        if said:
            st.detail = f"{st.detail}; {said}" if st.detail else said
    g = nx.DiGraph()
    g.add_nodes_from(run.ranks)  # (a rank without a log has no edge: a world of a million is not walked)
    channels = Channels(run, sequences or Sequences(run))
    for rank, st in states.items():  # (gloo's sends have no completion of their own: the recv's tells)
        st.blocked = [ev for ev in st.blocked if not channels.delivered(rank, ev)]
    inside = _inside(states)
    waiting = {r for r in inside if states[r].state in WAITING_STATES}
    for rank in inside:  # a collective's slot in its group, as the matcher counts (P2P left out)
        st = states[rank]
        st.blocked, st.queued = ([ev if ev.sig.op in P2P_OPS else replace(ev, position=channels.collective_position(rank, ev))
                                  for ev in evs] for evs in (st.blocked, st.queued))
    for rank, st in states.items():
        log = run.ranks.get(rank)
        if st.state in ("dumped", "waiting-at-dump") or (log is not None and log.syncs and st.blocked):
            st.detail = _on_stream(log, st.blocked, st.queued, channels)
    for rank in sorted(waiting):
        for ev in states[rank].blocked:
            if ev.sig.op in P2P_OPS:
                peer = ev.peer_global
                if peer is not None and peer != rank and not channels.partner_posted(rank, ev):
                    g.add_edge(rank, peer, group=ev.group, event=ev)
                continue
            for other in run.group_members(ev.group):
                if other != rank and channels.collectives(other, ev.group) <= ev.position:
                    g.add_edge(rank, other, group=ev.group, event=ev)
    if run.on_streams and run.source != "flight-recorder":
        _stream_order_edges(run, states, waiting, g)
    cycles = []
    for cyc in nx.simple_cycles(g) if g.number_of_edges() else ():  # (no edge, no cycle: a clean run's ranks not walked)
        # (within one group, collectives alone cannot form a cycle: positions only grow; P2P can)
        if len(cyc) > 1:
            cycles.append(cyc)
        if len(cycles) >= 10:
            break
    roots = sorted(r for r in g.nodes if r not in waiting and g.in_degree(r) > 0)
    if inside and not roots:  # all inside one collective: the ones whose collective itself failed, or went first
        roots = sorted(r for r, s in states.items() if s.state in ("collective-failed", "crashed")) or order.first
    return HangAnalysis(states, g, cycles, roots, waiting, order)


def _stream_order_edges(run: Run, states: dict, waiting: set, g: nx.DiGraph) -> None:
    """Under NCCL a rank may have issued a collective that still cannot start: a blocking call
    made its stream wait for an earlier collective of another group, stuck itself. A rank whose
    collective waits for a member that issued its part but is stuck in an earlier one waits on
    that member (a cycle of these is a deadlock across groups, as under gloo). The issue order is
    taken as the stream order (a Flight Recorder dump says which collectives started instead)."""
    first = {r: min(st.blocked, key=lambda e: e.t_issue) for r, st in states.items() if st.blocked}
    for rank in sorted(waiting):
        for ev in states[rank].blocked:
            if ev.sig.op in P2P_OPS:
                continue
            for other in run.group_members(ev.group):
                busy = first.get(other)
                if other == rank or busy is None or (busy.group, busy.position) == (ev.group, ev.position):
                    continue
                mine = [e for e in states[other].blocked + states[other].queued
                        if (e.group, e.position) == (ev.group, ev.position)]
                if mine and busy.t_issue < mine[0].t_issue and not g.has_edge(rank, other):
                    g.add_edge(rank, other, group=ev.group, event=ev)


def hang_findings(run: Run, hang: HangAnalysis) -> list[Finding]:
    """A deadlock per wait-for cycle, else one hang: ranks that never completed their last
    collective, whether they waited until a timeout or a kill, or failed at once with a peer."""
    if not hang.inside:
        return []
    first_rank = min(hang.inside, key=lambda r: (hang.states[r].blocked[0].t_issue, r))
    ev = hang.states[first_rank].blocked[0]
    events = {r: (hang.states[r].blocked[0] if hang.states[r].blocked else None) for r in hang.states
              if r in run.ranks}
    last = max((e.t_issue for s in hang.states.values() for e in s.blocked), default=ev.t_issue)
    out = []
    for cyc in hang.cycles:
        edges = [hang.graph.edges[cyc[i], cyc[(i + 1) % len(cyc)]] for i in range(len(cyc))]
        groups = [e["group"] for e in edges]
        waits = [_wait_text(e["event"]) for e in edges]
        culprits = _cycle_culprits(run, hang.graph, cyc)
        # the finding is at the first culprit's own slot: the collective it waits in
        at = edges[cyc.index(culprits[0])]["event"]
        details = {"cycle": list(cyc), "groups": groups, "waits": waits}
        if len(culprits) < len(cyc):
            details["waited_on_by"] = {r: sorted(hang.graph.predecessors(r)) for r in culprits}
        out.append(Finding("deadlock", at.group, at.position, culprits, "", events, None, details, last + 1))
    if not out:
        details = {"waiting": sorted(hang.inside), "root_causes": hang.root_causes,
                   "edges": [[a, b] for a, b in hang.graph.edges]}
        observed = _observed(hang)
        if observed:
            details["gloo_observed"] = observed
        queued = {r: len(hang.states[r].queued) for r in sorted(hang.inside) if hang.states[r].queued}
        if queued:
            details["queued"] = queued
        out.append(Finding("hang", ev.group, ev.position, hang.root_causes or sorted(hang.inside), "", events,
                           None, details, last + 1))
    return out


def _cycle_culprits(run: Run, graph: nx.DiGraph, cycle: list[int]) -> list[int]:
    """The ranks of a wait-for cycle that the most ranks wait on: on a mesh, the one rank that
    entered a rank-only branch (a collective on its dp group) is waited on by every other rank
    of the world group, its dp peer only by it. A symmetric cycle (two ranks issuing two groups'
    collectives in opposite orders) blames all its ranks, and so does a cycle through a rank
    whose call torch skipped (not a member of the group): that call, not the rank the others
    wait on, explains it."""
    if any(r in run.ranks and run.ranks[r].non_member for r in cycle):
        return sorted(cycle)
    waited_on = {r: graph.in_degree(r) for r in cycle}
    most = max(waited_on.values())
    return sorted(r for r, n in waited_on.items() if n == most)


FAILED_STATES = frozenset(("peer-lost", "collective-failed", "crashed", "raised"))


def abort_text(hang: HangAnalysis) -> str | None:
    """How the job ended when it aborted instead of hanging: some rank failed (gloo's size check,
    a peer that exited or crashed) and none waited for a timeout; ranks killed while they waited
    are named as their evidence allows (ending.py: the first to go, or stopped by the launcher
    after it). None: no rank failed, or some rank hung."""
    states = {r: s.state for r, s in hang.states.items()}
    if not hang.inside or any(st in HUNG_STATES - {"killed-in-collective"} for st in states.values()):
        return None
    if not any(st in FAILED_STATES for st in states.values()):
        return None
    return _how_they_ended({r: _ended_as(hang.states[r]) for r, st in states.items() if st in _ENDED}, hang.order)


def _observed(hang: HangAnalysis) -> str | None:
    """What this run's ranks really did, when none of them waited until a timeout or a kill."""
    if any(hang.states[r].state in HUNG_STATES for r in hang.inside):
        return None
    return "in this run no rank waited for a timeout: " + _how_they_ended({r: _ended_as(hang.states[r]) for r in hang.inside},
                                                                           hang.order)


# how a rank ended, in words (a state not listed here is shown as it is)
_ENDED = {"peer-lost": "failed at once with 'Connection closed/reset by peer' (a peer went away)",
          "collective-failed": "raised inside the collective (the op itself failed)",
          "crashed": "died of a fatal signal inside the collective (SIGABRT from a gloo check)",
          "raised": "raised an exception with the collective still pending",
          "raised-outside": "raised an exception with none of its collectives pending",
          "killed-in-collective": None}  # (killed from outside: ending.killed_words, from the evidence)


def _ended_as(s: RankState) -> str:
    """The state whose words say how the rank ended: a rank that raised while waiting in no
    collective raised an error of its own program (or of a call torch refused), not a collective's."""
    return "raised-outside" if s.state == "raised" and not s.blocked else s.state


def _how_they_ended(states: dict[int, str], order: KillOrder) -> str:
    """'ranks 0-1 failed at once with ...; rank 2 was killed first ...'; the rank that went first
    (order.first) before the others."""
    by_words: dict[str, list[int]] = {}
    for r in sorted(states, key=lambda r: (r not in order.first, r)):
        st = states[r]
        words = _ENDED.get(st, st) or killed_words(r, st, order)
        by_words.setdefault(words, []).append(r)
    return "; ".join(f"rank{'s' if len(rs) != 1 else ''} {rank_ranges(rs)} {words}" for words, rs in by_words.items())


def _wait_text(ev) -> str:
    """What a rank in a wait-for cycle is blocked in, in a few words."""
    if ev.sig.op in P2P_OPS:
        return f"in {ev.sig.api or ev.sig.op} with peer {ev.peer_global} in group {ev.group}"
    return f"in {ev.sig.api or ev.sig.op} #{ev.position} of group {ev.group}"
