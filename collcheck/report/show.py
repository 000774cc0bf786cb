"""`collcheck show LOG`: one rank's log as a readable table."""

from __future__ import annotations

from rich.table import Table

from ..base.untrusted import one_line
from ..knowledge import sites
from ..model import REDUCE_OPS, load_run, members_text
from .console import make_console

SHOW_WIDTH = 140  # the default width (COLUMNS unset, not a terminal): room for the table's 13 columns


def show(path: str, out, limit: int = 0) -> None:
    run = load_run([path])
    (log,) = run.ranks.values()
    h = log.header
    console = make_console(out, SHOW_WIDTH)  # every string from the log goes through one_line / visible
    hv = {k: one_line(h.get(k), 200) for k in ("rank", "world", "run", "host", "pid", "torch", "backend")}
    console.print(f"rank {hv['rank']}/{hv['world']}  run {hv['run']}  host {hv['host']} pid {hv['pid']}  "
                  f"torch {hv['torch']}  backend {hv['backend']}  state: {log.state}")
    if log.exception:
        site = log.exception[2] if len(log.exception) > 2 else None
        message = log.exception[1].split("\n", 1)[0] if isinstance(log.exception[1], str) else ""
        console.print(f"uncaught exception: {one_line(log.exception[0])}: {one_line(message)}"
                      + (f"  (raised at {sites.full(site)})" if site else ""))
    if log.stopped is not None:
        console.print(f"recording stopped: {one_line(log.stopped)} (after {len(log)} collectives; what came after is "
                      "not known)")
    if log.torn:
        console.print("the file ends in a torn record (the process died while writing)")
    for note in log.damage_notes():
        console.print(f"warning: {one_line(note)}")
    t = Table(show_lines=False)
    for col in ("#", "group", "pos", "api", "op", "tensors", "reduce", "root/peer", "label", "site", "thread", "µs", "state"):
        t.add_column(col)
    start = max(0, len(log) - limit) if limit else 0
    for i in range(start, len(log)):
        e = log.event(i)
        s = e.sig
        dur = str(e.t_done - e.t_issue) if e.t_done is not None else ""
        state = "ok" if e.completed else (f"error: {one_line(e.error, 40)}" if e.error else "not completed")
        tensors = " ".join(f"{d}[{'x'.join(map(str, sh))}]" for d, sh in e.sized.tensors) + e.splits_text()
        # the recorded sequence number (`j`: in the group, or in the P2P channel) where the log lost
        # or dropped collectives (kept only then), else the position among the kept events
        pos = log.seq[i] if i < len(log.seq) else e.position
        t.add_row(str(i), one_line(e.group), str(pos), one_line(s.api), one_line(s.op), one_line(tensors),
                  REDUCE_OPS.get(s.reduce_op, "") if s.reduce_op is not None else "",
                  "" if s.root is None else str(s.root), one_line(e.label or ""), one_line(e.where()),
                  one_line(e.thread), dur, state)
    console.print(t)
    for c in log.creations:
        console.print(f"group {one_line(c.op)}: {one_line(c.name)} ranks={members_text(c.ranks) if c.ranks else '?'}"
                      + (f" at {sites.short(c.site)}" if c.site else ""))
    for api, site, _ in log.non_member:
        console.print(f"skipped by torch (not a member of the group): {one_line(api)}"
                      + (f" at {sites.short(site)}" if site else ""))
    for w in log.watchdog:
        console.print(f"watchdog: stuck {one_line(w.get('waited_s'), 40)} s in {one_line(w.get('op'), 200)} "
                      f"(collective #{one_line(w.get('i'), 40)}); Python stacks, innermost last:")
        console.print(stack_text(w), markup=False)
    console.file.flush()


def stack_text(record: dict, threads: int = 8, frames: int = 12) -> str:
    """The thread stacks of a watchdog (W) record as indented text, innermost frame last; each
    name and frame from the log on one line of its own, escaped."""
    lines = []
    for th in (record.get("threads") or [])[:threads]:
        lines.append(f"  thread {one_line(th.get('n', '?'))}:")
        fs = th.get("f") or []
        if len(fs) > frames:
            lines.append(f"    ... {len(fs) - frames} outer frames")
        lines += [f"    {sites.full(f)}" for f in fs[-frames:]]
    return "\n".join(lines)



