"""Human report (rich): the first divergence side by side per rank, as in seed 004's
hand-made traces, then the other findings, then the hang summary."""

from __future__ import annotations

from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..analysis.fold import fold_identical
from ..base.untrusted import one_line, visible
from ..knowledge import sites
from ..model import group_label, rank_ranges
from . import LAUNCH_CHARS, MESSAGE_CHARS, shown_warnings, words
from .console import make_console

MAX_COLUMNS = 8


def _cell(e) -> str:
    """The event as a table cell (report/words.py: the TUI's cells say the same)."""
    if e is None:
        return "—"
    label = f"\n  ({words.event_label(e)})" if e.label else ""
    return f"{words.event_words(e)}{words.event_state(e)}{label}\n  @{words.event_site(e)}"


def slot_rows(report, finding, context: int) -> dict[int, tuple[int, ...]]:
    """rank -> its event index (-1: none) in each row around the finding: row k is the same slot
    (the finding's + k - context) on every rank, also where a rank's sequence ended earlier."""
    run = report.run
    group = finding.group
    members = [r for r in run.group_members(group) if r in run.ranks] or sorted(run.ranks)
    seqs = report.sequences.group(group) if report.sequences is not None else None
    slot = finding.number - (seqs.start if seqs is not None else 0)
    out = {}
    for r in members:
        idx = seqs.index.get(r, ()) if seqs is not None else run.ranks[r].group_events(group)
        out[r] = tuple(idx[k] if 0 <= k < len(idx) else -1 for k in range(slot - context, slot + context + 1))
    return out


def side_by_side(report, finding, context: int) -> Table | None:
    """Each member's collectives around the finding, one column per set of identical ranks.

    Ranks are folded by their signature ids (in memory); only one representative per
    column is decoded from its log, so this stays cheap for thousands of ranks."""
    run = report.run
    if finding.kind in ("group_mismatch", "non_member_call") or finding.details.get("p2p"):
        return None
    group = finding.group
    windows = {}
    for r, rows in slot_rows(report, finding, context).items():
        log = run.ranks[r]
        key = (r in finding.ranks,  # all-to-all sizes are not in the signature: fold on them too
               tuple((log.sig[i], log.completed(i), log.a2a.get(i)) if i >= 0 else None for i in rows))
        windows[r] = (key, rows)
    folded = fold_identical({r: key for r, (key, _) in windows.items()})
    table = Table(title=Text(one_line(f"{group_label(report.run, group)}: collectives around #{finding.number}")),
                  show_lines=True, expand=False)
    table.add_column("", style="dim", no_wrap=True)
    columns = []
    for ranks, _ in folded[:MAX_COLUMNS]:
        rep = ranks[0]
        log = run.ranks[rep]
        rows = windows[rep][1]
        columns.append([_cell(log.event(i)) if i >= 0 else "" for i in rows])
        style = "bold red" if any(r in finding.ranks for r in ranks) else "bold"
        table.add_column(Text(f"rank{'s' if len(ranks) > 1 else ''} {rank_ranges(ranks)}"), header_style=style)
    for k in range(2 * context + 1):
        offset = k - context
        marker = "▶" if offset == 0 else f"{offset:+d}"
        cells = [Text(col[k] or ("— (nothing)" if offset == 0 else ""), style="red" if offset == 0 else "")
                 for col in columns]
        if any(c.plain for c in cells):
            table.add_row(marker, *cells)
    if len(folded) > MAX_COLUMNS:
        table.caption = Text(f"{len(folded) - MAX_COLUMNS} more distinct columns not shown")
    return table


def _chain_block(rank: int, e, width: int) -> str:
    """A rank's call chain (report/words.chain_words: the TUI's detail pane says the same)."""
    lines = words.chain_words(e, width - 12)
    if len(lines) == 1:
        return f"  rank {rank}: {lines[0]}  [thread {one_line(e.thread)}]\n"
    return f"  rank {rank}: {lines[0]}\n" + "".join(f"          {line}\n" for line in lines[1:])


def _finding_panel(report, f, index: int, width: int = 120) -> Panel:
    """The finding as a panel: its texts hold strings from the logs, so every part is a `Text`
    (never markup, the title included: rich parses a `str` title as markup) and escaped."""
    body = Text()
    body.append(visible(f.message, MESSAGE_CHARS) + "\n\n")
    placed = {r: e for r, e in sorted(f.events.items()) if e is not None and e.site}
    if placed:
        chained = any(e.chain and len(e.chain) > 1 for e in placed.values())
        body.append("call chains (outermost first):\n" if chained else "call sites:\n", style="bold")
        for r, e in list(placed.items())[:8]:
            body.append(_chain_block(r, e, width))
    waiting = f.details.get("waiting_in") or {}
    if waiting:
        body.append("where the other members wait:\n", style="bold")
        for r, i in sorted(waiting.items())[:8]:
            e = report.run.ranks[r].event(i)
            body.append(_chain_block(r, e, width).replace(f"rank {r}: ", f"rank {r} in {one_line(e.describe())} on "
                                                                        f"{one_line(group_label(report.run, e.group))}: ", 1))
    if f.kind == "group_mismatch":
        for r, site in sorted(f.details.get("sites", {}).items()):
            if site:
                body.append(f"  rank {r}: new_group at {sites.full(site)}\n")
    body.append("under NCCL: ", style="bold")
    body.append(visible(f.nccl) + "\n")
    body.append("under gloo: ", style="bold")
    body.append(visible(f.gloo) + "\n")
    body.append("usual fix: ", style="bold")
    body.append(visible(f.fix))
    title = f"{'FIRST DIVERGENCE' if index == 0 else f'finding {index + 1}'}: {f.title} — {group_label(report.run, f.group)}, #{f.number}, culprit rank{'s' if len(f.ranks) != 1 else ''} {rank_ranges(f.ranks)}"
    return Panel(body, title=Text(one_line(title)), title_align="left",
                 border_style="red" if f.severity == "error" else "yellow")


def snapshot_text(run) -> str:
    """'' for a run that ended; else which ranks were still running when their logs were read."""
    running = run.running
    if not running:
        return ""
    return (f"SNAPSHOT of a running job: rank{'s' if len(running) > 1 else ''} {rank_ranges(running)} still running "
            "when the logs were read (what they do next is not known)")


def render_first(report, out, headline: str, context: int = 4) -> None:
    """The first finding alone, as `render` shows it (live mode's report), under `headline`; for a
    hang, the final states and the wait-for graph too."""
    console = make_console(out)
    console.print(one_line(headline), markup=False)
    f = report.findings[0]
    console.print(_finding_panel(report, f, 0, console.width))
    table = side_by_side(report, f, context)
    if table is not None:
        console.print(table)
    if f.kind in ("hang", "deadlock"):
        _hang_summary(console, report)
    console.file.flush()


def render_launch(report, out, launch: str | None = None, context: int = 4, where: str = "") -> None:
    """The text report of one run (`launch`: its id in the folder `where` of several: named first)."""
    if launch is not None:
        console = make_console(out)
        console.print(Text(f"launch {one_line(launch, LAUNCH_CHARS)} of {one_line(where)}"), soft_wrap=True)
        console.file.flush()
    render(report, out, context=context)


def render(report, out, context: int = 4) -> None:
    console = make_console(out)
    run = report.run
    head = Text(f"collcheck diff: {one_line(run.directory)}  ({len(run.ranks)}/{run.world} ranks, "
                f"{sum(len(l) for l in run.ranks.values())} collectives)  verdict: ")
    head.append(report.verdict.upper(), style="bold")
    if report.aborted:
        head.append(f" ({one_line(report.aborted)})")
    console.print(head)
    if run.running:
        console.print(snapshot_text(run), style="bold", markup=False)
    if run.poll_ms is not None:
        console.print(words.completion_words(run), markup=False)
    listed, more = shown_warnings(run.warnings)
    for w in listed:
        console.print(f"warning: {one_line(w)}", markup=False)
    if more:
        console.print(more, markup=False)
    if not report.findings:
        console.print("No divergence in what could be checked; the warnings above say what could not be."
                      if report.verdict == "incomplete" else "No divergence: every group's collectives line up on all ranks.")
    for i, f in enumerate(report.findings):
        console.print(_finding_panel(report, f, i, console.width))
        if i == 0:
            table = side_by_side(report, f, context)
            if table is not None:
                console.print(table)
        if i >= 9:
            console.print(f"... {len(report.findings) - 10} more findings (use --format json for all)")
            break
    _hang_summary(console, report)
    console.file.flush()


def _hang_summary(console, report) -> None:
    states = report.hang.states
    if all(s.state == "finished" for s in states.values()) and not report.hang.inside:
        return
    t = Table(title="final state of each rank", show_lines=False)
    rows = words.final_states(report)
    hosts = any(row.host for row in rows)  # (a run over several hosts: which node)
    for column in ("ranks", *(("host",) if hosts else ()), "state", "blocked in", "detail"):
        t.add_column(column)
    for row in rows:
        t.add_row(row.ranks, *(Text(x) for x in ((row.host,) if hosts else ()) + (row.state, row.blocked, row.detail)))
    console.print(t)
    for line in words.host_lines(report):
        console.print(line, markup=False)
    lines = [f"  {w.words()}" for w in words.waits(report)]
    if lines:
        console.print("wait-for graph:\n" + "\n".join(lines[:40]), markup=False)
    if report.hang.root_causes:
        console.print(f"root cause rank(s): {rank_ranges(report.hang.root_causes)} (waited on and waiting on nobody, "
                      "or failed inside the collective the others were in)")
    _watchdog_stacks(console, report)


def _watchdog_stacks(console, report, most: int = 4) -> None:
    """Where stuck ranks were, from their watchdog records: the main thread's innermost frames,
    one block per distinct stack (ranks folded)."""
    from .show import stack_text

    stacks = {}
    for r, log in sorted(report.run.ranks.items()):
        if log.watchdog:
            w = log.watchdog[-1]
            main = [t for t in w.get("threads") or [] if t.get("n") == "MainThread"][:1]
            stacks[r] = stack_text({"threads": main}, frames=6) if main else ""
    folded = [(ranks, text) for ranks, text in fold_identical(stacks) if text]
    if not folded:
        return
    console.print("where the stuck ranks were (watchdog, main thread; `collcheck show LOG` has every thread):")
    for ranks, text in folded[:most]:
        console.print(f" rank{'s' if len(ranks) > 1 else ''} {rank_ranges(ranks)}:\n{text}", markup=False)
