"""`collcheck show LOG`: one rank's log as a readable table."""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table

from .model import REDUCE_OPS, load_run


def show(path: str, out, limit: int = 0) -> None:
    run = load_run([path])
    (log,) = run.ranks.values()
    h = log.header
    # log contents are data, never rich markup (gloo errors look like "[/__w/pytorch/...]")
    console = Console(file=out, width=int(os.environ.get("COLUMNS", "140")), highlight=False, color_system=None,
                      markup=False)
    console.print(f"rank {h['rank']}/{h['world']}  run {h['run']}  host {h.get('host')} pid {h.get('pid')}  "
                  f"torch {h.get('torch')}  backend {h.get('backend')}  state: {log.state}")
    if log.exception:
        site = log.exception[2] if len(log.exception) > 2 else None
        console.print(f"uncaught exception: {log.exception[0]}: {log.exception[1].splitlines()[0] if log.exception[1] else ''}"
                      + (f"  (raised at {site[0]}:{site[1]} in {site[2]}())" if site else ""))
    if log.torn:
        console.print("the file ends in a torn record (the process died while writing)")
    for note in log.damage_notes():
        console.print(f"warning: {note}")
    t = Table(show_lines=False)
    for col in ("#", "group", "pos", "api", "op", "tensors", "reduce", "root/peer", "label", "site", "thread", "µs", "state"):
        t.add_column(col)
    start = max(0, len(log) - limit) if limit else 0
    for i in range(start, len(log)):
        e = log.event(i)
        s = e.sig
        dur = str(e.t_done - e.t_issue) if e.t_done is not None else ""
        state = "ok" if e.completed else (f"error: {e.error[:40]}" if e.error else "not completed")
        tensors = " ".join(f"{d}[{'x'.join(map(str, sh))}]" for d, sh in e.sized.tensors) + e.splits_text()
        # the recorded sequence number (`j`: in the group, or in the P2P channel) where the log lost
        # or dropped collectives (kept only then), else the position among the kept events
        pos = log.seq[i] if i < len(log.seq) else e.position
        t.add_row(str(i), e.group, str(pos), s.api, s.op, tensors,
                  REDUCE_OPS.get(s.reduce_op, "") if s.reduce_op is not None else "",
                  "" if s.root is None else str(s.root), e.label or "", e.where(), e.thread, dur, state)
    console.print(t)
    for c in log.creations:
        console.print(f"group {c.op}: {c.name} ranks={list(c.ranks) if c.ranks else '?'}"
                      + (f" at {os.path.basename(c.site[0])}:{c.site[1]}" if c.site else ""))
    for api, site, _ in log.non_member:
        console.print(f"skipped by torch (not a member of the group): {api}"
                      + (f" at {os.path.basename(site[0])}:{site[1]}" if site else ""))
    for w in log.watchdog:
        console.print(f"watchdog: stuck {w.get('waited_s')} s in {w.get('op')} (collective #{w.get('i')}); "
                      "Python stacks, innermost last:")
        console.print(stack_text(w), markup=False)


def stack_text(record: dict, threads: int = 8, frames: int = 12) -> str:
    """The thread stacks of a watchdog (W) record as indented text, innermost frame last."""
    lines = []
    for th in (record.get("threads") or [])[:threads]:
        lines.append(f"  thread {th.get('n', '?')}:")
        fs = th.get("f") or []
        if len(fs) > frames:
            lines.append(f"    ... {len(fs) - frames} outer frames")
        lines += [f"    {f[0]}:{f[1]} in {f[2]}()" for f in fs[-frames:]]
    return "\n".join(lines)

