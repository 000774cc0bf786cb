"""The statistics as a table (rich) or JSON."""

from __future__ import annotations

import itertools
import statistics

from rich.table import Table
from rich.text import Text

from ..base.untrusted import one_line
from ..knowledge import sites
from ..model import group_label, rank_ranges
from . import words
from .console import make_console
from .json_report import with_launch, write_json

STATS_JSON_VERSION = 1


def _site_text(s) -> str:
    return f"{sites.frame_text(s.site)}()" if s.site else "?"


def _fmt(x, unit: str = "", digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}{unit}"


def _site_dict(site) -> dict | None:
    return {"file": site[0], "line": site[1], "function": site[2]} if site else None


def _steps_dict(steps) -> dict | None:
    if steps is None:
        return None
    return {"count": steps.count, "wall_s": [round(x, 6) for x in steps.wall_s],
            "comm_s": [round(x, 6) for x in steps.comm_s], "share": round(steps.share, 4)}


def _site_row(run, s) -> dict:
    alg, bus = s.bandwidth_mbs(len(run.group_members(s.group)))
    return {"site": _site_dict(s.site), "api": s.api, "op": s.op, "group": s.group, "role": s.role, "ranks": s.ranks,
            "calls": s.calls, "bytes_per_call": s.bytes_per_call, "total_s": round(s.total_s, 6),
            "median_us": s.median_us, "p99_us": s.percentile_us(0.99), "algbw_mbs": alg, "busbw_mbs": bus}


def to_dict(st) -> dict:
    run, skew = st.run, st.skew
    return {
        "collcheck_stats": STATS_JSON_VERSION, "run": run.directory, "world": run.world,
        "completion_poll_ms": run.poll_ms,
        "steps": _steps_dict(st.steps),
        "hints": [{"kind": h.kind, "site": _site_dict(h.site), "gain_s": round(h.gain_s, 6), "text": h.text,
                   "evidence": h.evidence} for h in st.hints],
        "stragglers": [{"rank": s.rank, "wait_caused_s": round(s.wait_caused_us / 1e6, 6), "last_in": s.last_in,
                        "collectives": s.slots} for s in skew.stragglers],
        "clock_offsets_us": {str(r): o for r, o in sorted(skew.offsets_us.items())},
        "slots": [{"group": g, "position": p, "last": r, "waited_s": round(w / 1e6, 6)} for g, p, r, w, *_ in skew.slots],
        "sites": [_site_row(run, s) for s in st.sites],
        "groups": {g.name: {"members": list(g.members), "calls": g.calls, "bytes": g.bytes,
                            "label": group_label(run, g.name)} for g in st.groups.values()},
        "hosts": [{"host": h.host, "ranks": h.ranks, "cpus": h.cpus, "threads": h.threads,
                   "groups": h.groups,
                   "sample": {"api": h.sample[0], "bytes": h.sample[1]} if h.sample else None,
                   "mean_at_once": round(h.mean_at_once, 3),
                   "at_once": {str(k): {"collectives": len(v), "median_us": h.median_us(k),
                                        "mean_us": round(h.mean_us(k), 1)}
                               for k, v in sorted(h.by_count.items())}} for h in st.hosts],
    }


def renderables(st, top: int = 20, title: bool = True) -> list:
    """The report as rich renderables, in reading order (the CLI prints them, the TUI shows them
    under its own title line). Strings from the logs are escaped (`one_line`) and go in as `Text`,
    titles and cells included: a `str` would be read as markup where these are shown."""
    run, skew = st.run, st.skew
    out: list = []
    if title:
        out.append(Text(f"collcheck stats: {one_line(run.directory)}  ({len(run.ranks)}/{run.world} ranks)"))
    if run.poll_ms is not None:
        out.append(Text(words.completion_words(run)))
    if st.steps is not None:
        wall, comm = statistics.median(st.steps.wall_s), statistics.median(st.steps.comm_s)
        out.append(Text(f"steps (between optimizer steps): {st.steps.count}; per step {wall:.4f} s, {comm:.4f} s "
                        f"of it inside collectives ({100 * st.steps.share:.0f} %, medians)"))
    out += [Text(f"hint {i + 1} ({h.kind}): {one_line(h.text)}") for i, h in enumerate(st.hints[:5])]
    out.append(_sites_table(run, st.sites, top))
    if len(st.sites) > top:
        out.append(Text(f"... {len(st.sites) - top} more call sites (--top, or --format json for all)"))
    g = Table(title="groups")
    for col in ("group", "members", "collectives/rank", "bytes/rank"):
        g.add_column(col)
    for gs in itertools.islice(st.groups.values(), top):
        g.add_row(Text(one_line(group_label(run, gs.name))), rank_ranges(gs.members) if gs.members else "?",
                  str(gs.calls), str(gs.bytes))
    out.append(g)
    if len(st.groups) > top:
        out.append(Text(f"... {len(st.groups) - top} more groups (--top, or --format json for all)"))
    out += [_host_table(h) for h in st.hosts if h.sample and len(h.groups) > 1]
    if skew.slots:
        w = Table(title=f"stragglers: who came last to the {len(skew.slots)} collectives every member completed "
                        "(after each rank's first), and the others' waiting for it")
        for col in ("rank", "waiting caused (s)", "came last", "clock offset (µs)"):
            w.add_column(col, justify="right")
        for s in skew.stragglers[:top]:
            w.add_row(str(s.rank), f"{s.wait_caused_us / 1e6:.4f}", f"{s.last_in}/{s.slots}",
                      f"{skew.offsets_us.get(s.rank, 0.0):.0f}")
        out.append(w)
    return out


def _host_table(h) -> Table:
    t = Table(title=Text(one_line(f"host {h.host}: {len(h.ranks)} ranks on {h.cpus_text}; {h.sample[0]} of "
                                  f"{h.sample[1]} bytes against the groups communicating at once")))
    for col in ("groups at once", "collectives", "median (µs)", "mean (µs)"):
        t.add_column(col, justify="right")
    for k in sorted(h.by_count):
        t.add_row(str(k), str(len(h.by_count[k])), _fmt(h.median_us(k)), _fmt(h.mean_us(k)))
    return t


def _sites_table(run, sites, top: int) -> Table:
    t = Table(title="time inside collectives, per call site (issue to completion; the rank that spent the most)")
    for col in ("call site", "op", "group", "ranks", "calls/rank", "bytes/call", "total (s)", "median (µs)",
                "p99 (µs)", "algbw (MB/s)", "busbw (MB/s)"):
        t.add_column(col, justify="left" if col in ("call site", "op", "group", "ranks") else "right",
                     overflow="fold" if col in ("call site", "op") else "ellipsis")
    for s in sites[:top]:
        alg, bus = s.bandwidth_mbs(len(run.group_members(s.group)))
        op = one_line(s.api + (f" ({s.role})" if s.role else ""))
        t.add_row(Text(_site_text(s)), Text(op), Text(one_line(s.group)), rank_ranges(s.ranks), str(s.calls),
                  str(s.bytes_per_call), _fmt(s.total_s, digits=4), _fmt(s.median_us), _fmt(s.percentile_us(0.99)),
                  _fmt(alg, digits=2), _fmt(bus, digits=2))
    return t


def render_json(st, out, launch: str | None = None, **_) -> None:
    """`st` (summary.Stats) as JSON (`launch`: its id in a folder of several, kept as "launch")."""
    doc = to_dict(st)
    write_json(doc if launch is None else with_launch(doc, launch), out, indent=1)
    out.write("\n")


def render_text(st, out, top: int = 20, **_) -> None:
    """`st`'s tables: the first `top` call sites and groups."""
    console = make_console(out)
    for r in renderables(st, top):
        console.print(r)
    console.file.flush()
