"""Text panes: run overview, event detail, wait-for graph, step states (rich renderables)."""

from __future__ import annotations

import dataclasses
import linecache
import os

from rich.console import Group as RGroup
from rich.table import Table
from rich.text import Text

from collcheck.analysis.fold import fold_identical
from collcheck.model import rank_ranges

from .timeline import cell_text

STATE_STYLE = {"finished": "green", "raised": "bold red", "timed-out": "bold red", "stuck": "bold magenta",
               "killed-in-collective": "bold magenta", "killed": "red", "missing-log": "grey50",
               "damaged": "yellow"}
STATE_TEXT = {"finished": "finished", "raised": "raised an exception", "timed-out": "timed out in a collective",
              "stuck": "stuck (per watchdog)", "killed-in-collective": "killed while in collective",
              "killed": "killed", "missing-log": "no log", "damaged": "log damaged: its end is not known"}


def _blocked(e) -> str:
    return f"{e.describe()} #{e.position} of group {e.group}" if e is not None else ""


def overview(report) -> RGroup:
    """Run summary, first finding, final state of every rank (folded)."""
    run = report.run
    n = sum(len(log) for log in run.ranks.values())
    head = Text()
    head.append("run ", style="bold")
    head.append(f"{os.path.basename(os.path.normpath(run.directory))}   ")
    head.append(f"{len(run.ranks)}/{run.world} ranks, {len(run.group_names())} groups, {n} collectives   ")
    head.append("verdict: ", style="bold")
    color = {"clean": "green", "incomplete": "yellow"}.get(report.verdict, "red")
    head.append(report.verdict.upper(), style=f"bold {color}")
    head.append(f"   findings: {len(report.findings)}\n")
    for w in run.warnings:
        head.append(f"warning: {w}\n", style="yellow")
    groups = Table(title="groups", title_justify="left", show_edge=False, pad_edge=False)
    for c in ("group", "ranks", "collectives / rank"):
        groups.add_column(c)
    for g in run.group_names()[:12]:
        groups.add_row(Text(g), Text(rank_ranges(run.group_members(g))), Text(str(report.counts.get(g, 0))))
    parts = [head, groups]
    f = report.first
    if f is not None:
        t = Text("\n")
        t.append(f"first finding: {f.title} — group {f.group}, #{f.number}, ranks {rank_ranges(f.ranks)}\n",
                 style="bold red")
        t.append(f.message + "\n")
        t.append("usual fix: ", style="bold")
        t.append(f.fix + "\n")
        parts.append(t)
    else:
        parts.append(Text("\nNo divergence: every group's collectives line up on all ranks.\n", style="green"))
    states = Table(title="final state of every rank", title_justify="left", show_edge=False, pad_edge=False)
    for c in ("ranks", "state", "blocked in", "detail"):
        states.add_column(c, overflow="fold")
    rows = {r: (s.state, _blocked(s.blocked[0]) if s.blocked else "", s.detail) for r, s in report.hang.states.items()}
    for ranks, (state, blocked, detail) in fold_identical(rows)[:64]:
        states.add_row(rank_ranges(ranks), Text(STATE_TEXT.get(state, state), style=STATE_STYLE.get(state, "")),
                       Text(blocked), Text(detail))
    parts.append(states)
    return RGroup(*parts)


def _source(site, around: int = 3) -> Text:
    out = Text()
    if site is None:
        return out
    path, line = site[0], site[1]
    if not os.path.isfile(path):
        out.append(f"(source {path} not available locally)\n", style="grey50")
        return out
    for n in range(max(1, line - around), line + around + 1):
        src = linecache.getline(path, n)
        if not src and n > line:
            break
        out.append(f"{'▶' if n == line else ' '}{n:5d}  {src.rstrip()}\n", style="bold" if n == line else "")
    return out


def detail(grid, rank: int, row: int) -> RGroup:
    """Every recorded field of the selected event, its stack and the source around its call site."""
    ev = grid.event(rank, row)
    status = grid.status(rank, row)
    g, k = grid.slot(row)
    log = grid.run.ranks[rank]
    t = Text()
    t.append(f"rank {rank}, group {g}, collective #{k}: {status}\n", style="bold")
    if ev is None:
        t.append(f"no event: the rank's sequence in group {g} ended at #{len(grid.seqs[rank].idx.get(g, ()))} "
                 f"(final state: {grid.states.get(rank, '?')})\n")
        best, _ = grid.majority(row)
        if best is not None:
            t.append(f"the majority issued: {grid.run.signatures[best].describe()}\n")
        return RGroup(t, _dumps(log))
    t.append(cell_text(ev, status) + "\n\n")
    for f in dataclasses.fields(ev):
        v = getattr(ev, f.name)
        if f.name in ("stack", "chain", "sig") or (f.name in ("tensors", "splits") and v is None):  # all-to-all only
            continue
        if f.name.startswith("t_") and v is not None:
            v = f"{v} µs" + (f" (+{v - ev.t_issue} µs)" if f.name != "t_issue" else "")
        t.append(f"{f.name:>12}: ", style="bold")
        t.append(f"{v}\n")
    for f in dataclasses.fields(ev.sig):
        t.append(f"{'sig.' + f.name:>12}: ", style="bold")
        t.append(f"{getattr(ev.sig, f.name)}\n")
    t.append(f"{'log':>12}: ", style="bold")
    t.append(f"{os.path.basename(log.path)}\n")
    best, _ = grid.majority(row)
    if best is not None and best != grid.sig(rank, row):
        t.append(f"{'majority':>12}: ", style="bold red")
        t.append(grid.run.signatures[best].describe() + "\n")
    t.append("\nstack:\n", style="bold")
    if ev.stack or (ev.chain and len(ev.chain) > 1):
        if not ev.stack:
            t.append("  (the user's call chain, outermost first)\n", style="dim")
        for fr in ev.stack or ev.chain:
            t.append(f"  {fr[0]}:{fr[1]} in {fr[2]}\n" if fr else "  ?\n")
    else:
        t.append(f"  {ev.site[0]}:{ev.site[1]} in {ev.site[2]} (call site only)\n" if ev.site else "  (none recorded)\n")
    t.append("\nsource:\n", style="bold")
    return RGroup(t, _source(ev.site), _dumps(log))


def _dumps(log) -> Text:
    t = Text()
    for w in log.watchdog[-1:]:
        t.append(f"\nwatchdog: stuck {w.get('waited_s')} s in {w.get('op')}\n", style="bold magenta")
        for th in w.get("threads", [])[:8]:
            t.append(f"  thread {th.get('n')}:\n")
            for fr in th.get("f", [])[-12:]:
                t.append(f"    {fr[0]}:{fr[1]} in {fr[2]}\n")
    if log.sigterm_dump:
        t.append("\nSIGTERM dump:\n", style="bold magenta")
        t.append(log.sigterm_dump[-4000:])
    return t


def waitfor(report) -> RGroup:
    """Who waits on whom at the end of the run; cycles, culprits (root causes) and victims."""
    hang = report.hang
    t = Text()
    if not hang.graph.number_of_edges() and not hang.waiting:
        t.append("Nobody waits on anybody at the end of the run.\n", style="green")
        return RGroup(t)
    culprits = set(hang.root_causes) | {r for c in hang.cycles for r in c}
    t.append("culprits ", style="bold red")
    t.append(f"(waited on, waiting on nobody, or in a cycle): {rank_ranges(culprits)}\n")
    t.append("victims ", style="bold yellow")
    t.append(f"(waiting): {rank_ranges(hang.waiting)}\n\n")
    for cyc in hang.cycles:
        hops = " → ".join(f"rank {a} (group {hang.graph.edges[a, b]['group']})"
                          for a, b in zip(cyc, cyc[1:] + cyc[:1]))
        t.append(f"CYCLE: {hops} → rank {cyc[0]}\n", style="bold red")
    cyc_edges = {(c[i], c[(i + 1) % len(c)]) for c in hang.cycles for i in range(len(c))}
    waits: dict[int, dict] = {}
    for a, b, d in hang.graph.edges(data=True):
        ev = d.get("event")
        key = (d.get("group"), _blocked(ev) if ev is not None else "")
        waits.setdefault(a, {}).setdefault(key, []).append(b)
    rows = {a: tuple(sorted((k, tuple(v)) for k, v in w.items())) for a, w in waits.items()}
    t.append("\nwait-for edges:\n", style="bold")
    for ranks, w in fold_identical(rows)[:200]:
        for (group, blocked), targets in w:
            in_cycle = any((a, b) in cyc_edges for a in ranks for b in targets)
            style = "bold red" if in_cycle else ""
            t.append(f"  rank{'s' if len(ranks) > 1 else ''} {rank_ranges(ranks)}", style="yellow")
            t.append(f" wait in group {group} ({blocked}) on ", style=style)
            who = Text(f"rank{'s' if len(targets) > 1 else ''} {rank_ranges(targets)}",
                       style="bold red" if set(targets) & culprits else "")
            t.append_text(who)
            t.append("  ⟲ cycle\n" if in_cycle else "\n", style=style)
    states = {r: hang.states[r].state for r in culprits if r in hang.states}
    if states:
        t.append("\nculprit states:\n", style="bold")
        for ranks, st in fold_identical({r: (s,) for r, s in states.items()}):
            t.append(f"  ranks {rank_ranges(ranks)}: ", style="bold red")
            t.append(STATE_TEXT.get(st[0], st[0]) + "\n")
    return RGroup(t)


def steps(grid, row: int) -> Text:
    g, k = grid.slot(row)
    t = Text()
    t.append(f"step: collective #{k} of group {g} (row {row + 1}/{len(grid)})\n", style="bold")
    for ranks, text in grid.step_states(row)[:40]:
        style = "bold magenta" if text.startswith(("waiting", "failed")) else (
            "grey50" if text.startswith(("exited", "stopped", "not in")) else "")
        t.append(f"  rank{'s' if len(ranks) > 1 else ''} {rank_ranges(ranks)}: ", style="bold")
        t.append(text + "\n", style=style)
    return t
