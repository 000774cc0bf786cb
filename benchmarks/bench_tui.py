"""Benchmark of `collcheck tui` on a synthetic clean run: time to the first timeline screen, time per page scroll.

    python benchmarks/bench_tui.py --ranks 1024 --events 10000

Writes the run with `collcheck.synth.write_clean_run` (not timed), then drives the app
headless (`App.run_test`) at a fixed terminal size. Reported separately:
  first_screen_s        app start -> first complete paint of the timelines (for a run over
                        CollcheckApp.PREVIEW_BYTES: the preview of each rank's first collectives)
  preview               whether that first screen was the preview
  full_s                app start -> the full run loaded, analysed and painted
  load_analyse_s        of which: load_run + analyse + grid layout of the full run (worker thread)
  scroll_ms             per PageDown on the full run: key press -> the next page completely
                        painted (median, max)
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


async def _drive(directory: str, size: tuple[int, int], pages: int, extra_groups: bool,
                 preview_bytes: int | None = None, preview_events: int | None = None) -> dict:
    from collcheck.tui.app import CollcheckApp
    from collcheck.tui.widgets.timeline import Timeline

    t0 = time.perf_counter()
    app = CollcheckApp(directory, start_view="timelines", preview_bytes=preview_bytes)
    if preview_events:
        app.PREVIEW_EVENTS = preview_events
    out: dict = {}
    async with app.run_test(size=size) as pilot:
        tl = app.query_one(Timeline)

        async def painted(done):
            while tl.painted is None or not done():
                if app.error:
                    raise SystemExit(f"collcheck: error: {app.error}")
                await pilot.pause(0.005)
            return tl.painted

        first = await painted(lambda: app.report is not None)
        out["first_screen_s"] = first[1] - t0
        out["preview"] = app.preview
        out["full_s"] = (await painted(lambda: app.loaded_at and tl.painted[1] >= app.loaded_at))[1] - t0
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
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from collcheck.synth import write_clean_run

    tmp = args.dir or tempfile.mkdtemp(prefix=f"collcheck-bench-tui-{args.ranks}x{args.events}-")
    try:
        t = time.perf_counter()
        if not (args.dir and os.path.isdir(tmp) and os.listdir(tmp)):
            write_clean_run(tmp, args.ranks, args.events)
        write_s = time.perf_counter() - t
        w, h = (int(x) for x in args.size.split("x"))
        res = asyncio.run(_drive(tmp, (w, h), args.pages, args.unfold, args.preview_bytes,
                                 args.preview_events))
        res.update(ranks=args.ranks, events=args.events, write_s=write_s, size=args.size, cpus=os.cpu_count())
    finally:
        if not args.dir:
            shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{args.ranks} ranks x {args.events} collectives ({res['rows']} rows, {res['columns']} column(s) folded"
              f"{', %d unfolded' % res['columns_unfolded'] if 'columns_unfolded' in res else ''}), terminal {args.size}, "
              f"{res['cpus']} CPUs")
        what = (f"preview of the first {res['preview']} collectives per rank" if res["preview"]
                else "the whole run")
        print(f"  first timeline screen: {res['first_screen_s']:.2f} s from app start ({what})")
        print(f"  whole run loaded, analysed and painted: {res['full_s']:.2f} s from app start "
              f"(load + analyse + layout in the worker: {res['load_analyse_s']:.2f} s)")
        print(f"  page scroll: median {res['scroll_ms_median']:.1f} ms, max {res['scroll_ms_max']:.1f} ms "
              f"over {res['scroll_pages']} PageDown presses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
