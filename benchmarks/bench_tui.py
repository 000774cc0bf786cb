"""Benchmark of `collcheck tui` on a synthetic clean run: time to the first screen, time per page scroll.

    python benchmarks/bench_tui.py --ranks 1024 --events 10000
    python benchmarks/bench_tui.py --ranks 32768 --events 10000 --dir /tmp/r32768 --child off

Writes the run with `collcheck.synth.write_clean_run` (not timed), then drives the app
headless (`App.run_test`) at a fixed terminal size. Reported separately:
  first_screen_s        app start -> first complete paint of the timelines: the loader process's
                        first screen (a big run read by kinds), the preview of each rank's first
                        collectives (a run over CollcheckApp.PREVIEW_BYTES read in full), or the
                        whole run
  first                 which of the three it was ("loader process", "preview", "whole run"); the
                        loader process's first screen of a big run is partial: its first logs, no
                        verdict yet (partial: how many logs of how many)
  judged_s              app start -> first paint of a first screen with its verdict (the loader
                        process's whole first screen, or the whole run)
  full_s                app start -> the full run loaded, analysed and painted
  load_analyse_s        of which: load_run + analyse + grid layout of the full run (worker thread)
  keys_while_loading_ms per arrow key pressed on the first screen while the rest is built: key
                        press -> the cursor's row painted (median, max; none when the rest came first)
  scroll_ms             per PageDown on the full run: key press -> the next page completely
                        painted (median, max)
`--child on|off` reads the run in the loader process, or in the app's worker thread (as before
there was one); `auto` (the default) as `collcheck tui` does. `--bare` times the same loading
work in this process without the app: what the interface costs the worker thread. `--summaries N`
times the read of the first N logs' summaries (header and last checkpoint, what the loader reads
of every log) in this process, by the compiled pass and by the Python reader: µs of one core per log. `--stages` times the
loader process's steps to the first screen with its verdict one by one in this process: every
log's summary read, the ranks built, the analysis, the grid, the panes, the first page.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time


async def _keys_while_loading(app, tl, most: int = 20) -> list[float]:
    """Arrow keys on the first screen while the rest is built: key press -> the row painted, ms.

    Each key goes in as the terminal driver sends it (pilot.press would wait for the process to
    be idle, which it is not while the worker builds)."""
    from textual import events

    times = []
    for k in range(most):
        if app.report is not None:
            break
        before = tl.painted
        key = events.Key("down" if k % 2 == 0 else "up", None)
        key.set_sender(app)
        t = time.perf_counter()
        app._driver.send_message(key)
        while tl.painted is before and time.perf_counter() - t < 5:
            await asyncio.sleep(0.001)
        times.append((tl.painted[1] - t) * 1000)
        await asyncio.sleep(0.1)  # (a person's pace: the worker builds in between)
    return times


async def _drive(directory: str, size: tuple[int, int], pages: int, extra_groups: bool,
                 preview_bytes: int | None = None, preview_events: int | None = None,
                 child: bool | None = None) -> dict:
    from collcheck.tui.app import CollcheckApp
    from collcheck.tui.widgets.timeline import Timeline

    t0 = time.perf_counter()
    app = CollcheckApp(directory, start_view="timelines", preview_bytes=preview_bytes, child=child)
    if preview_events:
        app.PREVIEW_EVENTS = preview_events
    out: dict = {}
    async with app.run_test(size=size) as pilot:
        tl = app.query_one(Timeline)

        async def painted(done):
            while tl.painted is None or not done():
                if app.error or app.loader_died:
                    raise SystemExit(f"collcheck: error: {app.error or app.loader_died}")
                await pilot.pause(0.005)
            return tl.painted

        first = await painted(lambda: app.report is not None or app.first_at)
        out["first_screen_s"] = first[1] - t0
        out["preview"] = app.preview
        out["first"] = "preview" if app.preview else "loader process" if app.report is None else "whole run"
        out["partial"] = app.partial if app.report is None else None
        judged = asyncio.ensure_future(painted(lambda: (app.judged_at and tl.painted[1] >= app.judged_at)
                                               or (app.loaded_at and tl.painted[1] >= app.loaded_at)))
        keys = await _keys_while_loading(app, tl)
        out["keys_while_loading_ms"] = [round(t, 1) for t in keys]
        out["full_s"] = (await painted(lambda: app.loaded_at and tl.painted[1] >= app.loaded_at))[1] - t0
        out["judged_s"] = (await judged)[1] - t0
        out["load_analyse_s"] = app.load_seconds
        out["rows"], out["columns"] = len(app.grid), len(app.grid.columns)
        if extra_groups:
            tl.toggle_fold()  # unfold the first column: one column per rank
            await pilot.pause()
            out["columns_unfolded"] = len(app.grid.columns)
        times = []
        for _ in range(pages):
            before = tl.painted
            t = time.perf_counter()
            await pilot.press("pagedown")
            while tl.painted is before or tl.painted[0] == before[0]:
                await pilot.pause(0)
                if time.perf_counter() - t > 5:
                    break
            times.append((tl.painted[1] - t) * 1000)
        out["scroll_ms_all"] = [round(t, 1) for t in times]
        out["scroll_ms_median"] = statistics.median(times)
        out["scroll_ms_max"] = max(times)
        out["scroll_pages"] = len(times)
        out["last_row"] = tl.cursor_row
    return out


def _bare(directory: str) -> dict:
    """The app's loading work (discover, load_run, analyse, the grid; the cycle collector paused, as
    the app's worker pauses it) in this process, with no interface: what the interface costs."""
    t = time.perf_counter()
    from collcheck.analysis.diff import analyse
    from collcheck.base import collector
    from collcheck.inputs.discover import discover
    from collcheck.model import load_run
    from collcheck.tui import navigation
    from collcheck.tui.grid import Grid

    imported = time.perf_counter()
    with collector.paused():
        report = analyse(load_run(discover(directory)))
        group = navigation.default_group(report, navigation.MERGED)
        Grid(report, None if group == navigation.MERGED else group)
    return {"imports_s": imported - t, "bare_s": time.perf_counter() - imported}


def _stages(directory: str) -> dict:
    """The loader process's way to the first screen with its verdict, step by step in this process
    (the cycle collector paused, as there): every log's summary read (in worker processes), the
    ranks built from them, the analysis, the grid, the panes and the first page, in seconds."""
    from collcheck.analysis.diff import analyse
    from collcheck.base import collector
    from collcheck.inputs.discover import discover
    from collcheck.model import load, load_run
    from collcheck.tui import navigation
    from collcheck.tui.grid import Grid
    from collcheck.tui.page import first_page
    from collcheck.tui.plain import summary_facts, to_plain
    from collcheck.tui.widgets import panes

    source, known, out = discover(directory), {}, {}

    def step(name, work):
        t = time.perf_counter()
        result = work()
        out[name + "_s"] = time.perf_counter() - t
        return result

    workers = os.cpu_count() or 1
    with collector.paused():
        step("summaries", lambda: load._summaries(source.logs, workers, True, source.headers, known))
        run = step("build", lambda: load_run(source, known=known))
        report = step("analyse", lambda: analyse(run))
        group = navigation.default_group(report, navigation.MERGED)
        grid = step("grid", lambda: Grid(report, None if group == navigation.MERGED else group))
        step("panes", lambda: (summary_facts(report), to_plain(panes.overview(report)), to_plain(panes.waitfor(report))))
        marks, culprits = navigation.marks(report, grid, -1)
        step("page", lambda: first_page(report, grid, marks, culprits))
    return out


def _summaries(directory: str, n: int) -> dict:
    """The loader's read of each log's header and last checkpoint, for the first `n` logs, three
    times (the best, per log, CPU time of this process): by the compiled pass in one call, as
    the loader reads them (logfile/summaries.py; None without a C compiler), and by the Python
    reader log by log (model/load.py's `_summary`)."""
    from collcheck.inputs.discover import discover
    from collcheck.logfile.reader import segmented
    from collcheck.logfile.summaries import compiled_summaries
    from collcheck.model.load import _read, _summary

    paths = discover(directory).logs[:n]
    capped = segmented(paths)

    def best(work) -> float:
        least = float("inf")
        for _ in range(3):
            t = time.process_time()  # (the CPU this process used: other processes' load left out)
            work()
            least = min(least, time.process_time() - t)
        return least / len(paths) * 1e6

    compiled = best(lambda: _read([(p, None) for p in paths], True, capped)) if compiled_summaries() else None
    python = best(lambda: [_summary(path, True, None, capped) for path in paths])
    return {"logs": len(paths), "summary_us": compiled if compiled is not None else python, "compiled_us": compiled,
            "python_us": python}


def _said(res: dict, args) -> str:
    """The figures in words."""
    lines = []
    lines.append(f"{args.ranks} ranks x {args.events} collectives ({res['rows']} rows, {res['columns']} column(s) folded"
                 f"{', %d unfolded' % res['columns_unfolded'] if 'columns_unfolded' in res else ''}), terminal {args.size}, "
                 f"{res['cpus']} CPUs")
    what = (f"preview of the first {res['preview']} collectives per rank" if res["preview"]
            else "the loader process's first screen" if res["first"] == "loader process" else "the whole run")
    part = res["partial"]
    what += f", partial: the first {part['read']:,} of {part['total']:,} logs" if part else ""
    lines.append(f"  first timeline screen: {res['first_screen_s']:.2f} s from app start ({what})")
    if part:
        lines.append(f"  first screen with its verdict: {res['judged_s']:.2f} s from app start")
    keys = res["keys_while_loading_ms"]
    if keys:
        lines.append(f"  arrow key -> painted while the rest is built: median {statistics.median(keys):.1f} ms, "
                     f"max {max(keys):.1f} ms over {len(keys)} keys")
    lines.append(f"  whole run loaded, analysed and painted: {res['full_s']:.2f} s from app start "
                 f"(load + analyse + layout in the worker: {res['load_analyse_s']:.2f} s)")
    lines.append(f"  page scroll: median {res['scroll_ms_median']:.1f} ms, max {res['scroll_ms_max']:.1f} ms "
                 f"over {res['scroll_pages']} PageDown presses")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_tui.py", description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--events", type=int, default=10000)
    p.add_argument("--pages", type=int, default=30, help="PageDown presses timed (default 30)")
    p.add_argument("--size", default="200x50", help="terminal size WxH (default 200x50)")
    p.add_argument("--unfold", action="store_true", help="unfold the folded column before scrolling (1 column per rank)")
    p.add_argument("--dir", help="use (or write) the run here and keep it")
    p.add_argument("--preview-bytes", type=int, default=None,
                   help="preview runs with more log bytes than this (default: the app's, 32 MiB)")
    p.add_argument("--preview-events", type=int, default=None,
                   help="collectives read for the preview, all ranks together (default: the app's, 300,000)")
    p.add_argument("--child", choices=("auto", "on", "off"), default="auto",
                   help="read the run in the loader process (on), in the app's worker thread (off), or as "
                        "`collcheck tui` chooses (auto, the default)")
    p.add_argument("--bare", action="store_true",
                   help="time the app's loading work in this process with no interface, instead of the app")
    p.add_argument("--stages", action="store_true",
                   help="time the loader process's steps to the first screen with its verdict, in this process")
    p.add_argument("--summaries", type=int, metavar="N",
                   help="time the read of the first N logs' summaries instead of the app (µs per log)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from collcheck.synth import write_clean_run

    tmp = args.dir or tempfile.mkdtemp(prefix=f"collcheck-bench-tui-{args.ranks}x{args.events}-")
    try:
        t = time.perf_counter()
        if not (args.dir and os.path.isdir(tmp) and os.listdir(tmp)):
            write_clean_run(tmp, args.ranks, args.events)
        write_s = time.perf_counter() - t
        if args.summaries:
            res = _summaries(tmp, args.summaries)
            compiled = "no C compiler" if res["compiled_us"] is None else f"{res['compiled_us']:.0f} µs"
            print(json.dumps(res) if args.json else f"{res['logs']} logs' summaries (header and last checkpoint), "
                  f"of one core per log: compiled pass {compiled}, Python reader {res['python_us']:.0f} µs")
            return 0
        if args.stages:
            res = _stages(tmp)
            print(json.dumps(res) if args.json else f"{args.ranks} ranks x {args.events} collectives, the loader's steps: "
                  + ", ".join(f"{k[:-2]} {v:.2f} s" for k, v in res.items()))
            return 0
        if args.bare:
            res = _bare(tmp)
            print(json.dumps(res) if args.json else f"{args.ranks} ranks x {args.events} collectives, no interface: "
                  f"discover + load + analyse + grid {res['bare_s']:.2f} s (imports before: {res['imports_s']:.2f} s)")
            return 0
        w, h = (int(x) for x in args.size.split("x"))
        child = {"auto": None, "on": True, "off": False}[args.child]
        res = asyncio.run(_drive(tmp, (w, h), args.pages, args.unfold, args.preview_bytes,
                                 args.preview_events, child))
        res.update(ranks=args.ranks, events=args.events, write_s=write_s, size=args.size, cpus=os.cpu_count())
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(res) if args.json else _said(res, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
