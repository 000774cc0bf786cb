"""Text panes: run overview, event detail, wait-for graph, step states (rich renderables).

Strings from the logs are data: each goes through `one_line` (names, cells) or `visible`
(messages, stacks, dumps) and into `Text`, never into markup (Textual reads a `str` as markup)."""

from __future__ import annotations

import dataclasses
import linecache
import os

from rich.console import Group as RGroup
from rich.table import Table
from rich.text import Text

from ...analysis.fold import fold_identical
from ...base.untrusted import one_line, visible
from ...knowledge import sites
from ...model import rank_ranges
from ...report import MESSAGE_CHARS, shown_warnings, words
from ..cells import cell_text

STATE_STYLE = {"finished": "green", "raised": "bold red", "timed-out": "bold red", "stuck": "bold magenta",
               "killed-in-collective": "bold magenta", "killed": "red", "missing-log": "grey50",
               "damaged": "yellow", "recording-stopped": "yellow"}


MAX_SOURCE_BYTES = 8 << 20  # a call site's file larger than this is not read for the source pane




def overview(report) -> RGroup:
    """Run summary, first finding, final state of every rank (folded)."""
    run = report.run
    n = sum(len(log) for log in run.ranks.values())
    head = Text()
    head.append("run ", style="bold")
    head.append(f"{one_line(os.path.basename(os.path.normpath(run.directory)))}   ")
    head.append(f"{len(run.ranks)}/{run.world} ranks, {len(run.group_names())} groups, {n} collectives   ")
    head.append("verdict: ", style="bold")
    color = {"clean": "green", "incomplete": "yellow"}.get(report.verdict, "red")
    head.append(report.verdict.upper(), style=f"bold {color}")
    head.append(f"   findings: {len(report.findings)}\n")
    listed, more = shown_warnings(run.warnings)
    for w in listed:
        head.append(f"warning: {visible(w)}\n", style="yellow")
    if more:
        head.append(more.replace("--format json", "collcheck diff --format json") + "\n", style="yellow")
    groups = Table(title="groups", title_justify="left", show_edge=False, pad_edge=False)
    for c in ("group", "ranks", "collectives / rank"):
        groups.add_column(c)
    for g in run.group_names()[:12]:
        groups.add_row(Text(one_line(g)), Text(rank_ranges(run.group_members(g))), Text(str(report.counts.get(g, 0))))
    parts = [head, groups]
    f = report.first
    if f is not None:
        t = Text("\n")
        t.append(one_line(f"first finding: {f.title} — group {f.group}, #{f.number}, ranks {rank_ranges(f.ranks)}")
                 + "\n", style="bold red")
        t.append(visible(f.message, MESSAGE_CHARS) + "\n")
        t.append("usual fix: ", style="bold")
        t.append(visible(f.fix, MESSAGE_CHARS) + "\n")
        parts.append(t)
    else:
        parts.append(Text("\nNo divergence: every group's collectives line up on all ranks.\n", style="green"))
    states = Table(title="final state of every rank", title_justify="left", show_edge=False, pad_edge=False)
    rows = words.final_states(report, most=64)
    hosts = any(row.host for row in rows)  # (a run over several hosts: which node)
    for c in ("ranks", *(("host",) if hosts else ()), "state", "blocked in", "detail"):
        states.add_column(c, overflow="fold")
    for row in rows:
        states.add_row(Text(row.ranks), *((Text(row.host),) if hosts else ()),
                       Text(row.state, style=STATE_STYLE.get(row.raw, "")), Text(row.blocked), Text(row.detail))
    parts.append(states)
    parts.extend(Text(line) for line in words.host_lines(report))
    if report.run.poll_ms is not None:
        parts.append(Text(words.completion_words(report.run), style="grey50"))
    return RGroup(*parts)


def _source(site, around: int = 3) -> Text:
    """The lines around the call site, from the local file the log names (if it is a regular file
    of a sane size: the name comes from another machine); its text is shown escaped too."""
    out = Text()
    if site is None:
        return out
    path, line = site[0], site[1]
    if line.__class__ is not int or line < 1 or not isinstance(path, str):
        return out
    try:
        readable = os.path.isfile(path) and os.path.getsize(path) <= MAX_SOURCE_BYTES
    except (OSError, ValueError):  # a name with a NUL byte, a file that went away
        readable = False
    if not readable:
        out.append(f"(source {one_line(path)} not available locally)\n", style="grey50")
        return out
    for n in range(max(1, line - around), line + around + 1):
        src = linecache.getline(path, n)
        if not src and n > line:
            break
        out.append(f"{'▶' if n == line else ' '}{n:5d}  {one_line(src.rstrip())}\n",
                   style="bold" if n == line else "")
    return out


def _shown(v) -> str:
    """A field's value on one line: a string escaped, anything else as its (bounded) text."""
    return one_line(v if v.__class__ is str else f"{v}")  # the model's fields: small tuples, numbers, None


CHAIN_WIDTH = 120  # a chain's folded lines cut at this width, as a 132-column report cuts them


def detail(grid, rank: int, row: int, chain_width: int = CHAIN_WIDTH) -> RGroup:
    """Every recorded field of the selected event, its stack and the source around its call site."""
    ev = grid.event(rank, row)
    status = grid.status(rank, row)
    g, k = grid.slot(row)
    log = grid.run.ranks[rank]
    t = Text()
    t.append(f"rank {rank}, group {one_line(g)}, collective #{k}: {status}\n", style="bold")
    if ev is None:
        t.append(f"no event: the rank's sequence in group {one_line(g)} ended at "
                 f"#{len(grid.seqs[rank].idx.get(g, ()))} "
                 f"(final state: {grid.states.get(rank, '?')})\n")
        expected = grid.expected(row)
        if expected is not None:
            t.append(f"the ranks in step issued: {one_line(expected.sig.describe())}\n")
        return RGroup(t, _dumps(log))
    t.append(cell_text(ev, status) + "\n\n")  # escaped by cell_text
    for f in dataclasses.fields(ev):
        v = getattr(ev, f.name)
        if f.name in ("stack", "chain", "sig") or (f.name in ("tensors", "splits") and v is None):  # all-to-all only
            continue
        if f.name.startswith("t_") and v is not None:
            v = f"{v} µs" + (f" (+{v - ev.t_issue} µs)" if f.name != "t_issue" else "")
        t.append(f"{f.name:>12}: ", style="bold")
        t.append(f"{_shown(v)}\n")
    for f in dataclasses.fields(ev.sig):
        t.append(f"{'sig.' + f.name:>12}: ", style="bold")
        t.append(f"{_shown(getattr(ev.sig, f.name))}\n")
    t.append(f"{'log':>12}: ", style="bold")
    t.append(f"{one_line(os.path.basename(log.path))}\n")
    expected = grid.expected(row)
    if expected is not None and status in ("mismatched", "missing", "extra"):
        t.append(f"{'in step':>12}: ", style="bold red")
        t.append(one_line(expected.sig.describe()) + "\n")
    if ev.chain and len(ev.chain) > 1:  # the report's words for it (report/words.chain_words)
        t.append("\ncall chain (outermost first):\n", style="bold")
        for line in words.chain_words(ev, chain_width):
            t.append(f"  {line}\n")
    t.append("\nstack:\n", style="bold")
    if ev.stack:
        for fr in ev.stack:
            t.append(f"  {_frame(fr)}\n" if fr else "  ?\n")
    else:
        t.append(f"  {_frame(ev.site)} (call site only)\n" if ev.site else "  (none recorded)\n")
    t.append("\nsource:\n", style="bold")
    return RGroup(t, _source(ev.site), _dumps(log))


def _frame(fr) -> str:
    """'file:line in function()' (knowledge/sites.full), each part from the log escaped."""
    return sites.full(fr)


def _dumps(log) -> Text:
    t = Text()
    for w in log.watchdog[-1:]:
        t.append(f"\nwatchdog: stuck {one_line(w.get('waited_s'), 40)} s in {one_line(w.get('op'), 200)}\n",
                 style="bold magenta")
        for th in w.get("threads", [])[:8]:
            t.append(f"  thread {one_line(th.get('n'))}:\n")
            for fr in th.get("f", [])[-12:]:
                t.append(f"    {_frame(fr)}\n")
    if log.sigterm_dump:
        t.append("\nSIGTERM dump:\n", style="bold magenta")
        t.append(visible(log.sigterm_dump[-4000:]))
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
        t.append(f"CYCLE: {words.cycle_words(report, cyc)}\n", style="bold red")
    t.append("\nwait-for edges:\n", style="bold")
    for w in words.waits(report, most=200):
        style = "bold red" if w.in_cycle else "bold red" if set(w.targets) & culprits else ""
        t.append(f"  {w.words()}\n", style=style)
    states = {r: hang.states[r].state for r in culprits if r in hang.states}
    if states:
        t.append("\nculprit states:\n", style="bold")
        for ranks, st in fold_identical({r: (s,) for r, s in states.items()}):
            t.append(f"  ranks {rank_ranges(ranks)}: ", style="bold red")
            t.append(words.state_words(st[0]) + "\n")
    return RGroup(t)


def steps(grid, row: int) -> Text:
    g, k = grid.slot(row)
    t = Text()
    t.append(f"step: collective #{k} of group {one_line(g)} (row {row + 1}/{len(grid)})\n", style="bold")
    for ranks, text in grid.step_states(row)[:40]:
        style = "bold magenta" if text.startswith(("waiting", "failed")) else (
            "grey50" if text.startswith(("exited", "stopped", "not in")) else "")
        t.append(f"  rank{'s' if len(ranks) > 1 else ''} {rank_ranges(ranks)}: ", style="bold")
        t.append(one_line(text) + "\n", style=style)
    return t
