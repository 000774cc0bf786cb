"""`collcheck` command line: record, show, diff, stats, export, tui, replay, demo, build-fastpath.

Exit codes: 0 no finding, 1 findings, 2 usage or input error, 3 internal error, 4 no finding but
ranks or groups that could not be checked (missing logs, empty or one-sided Flight Recorder dumps).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from ..base.errors import FINDINGS, INCOMPLETE, OK, UsageError, parse_args, run_command
from ..logfile.reader import latest_run


def cmd_record(args) -> int:
    """Run a command with recording on (sets COLLCHECK=1 and a fresh run id)."""
    from ..base.settings import new_run_id

    if not args.command:
        raise UsageError("collcheck record: give a command, e.g. collcheck record -- torchrun --nproc-per-node 2 train.py")
    env = dict(os.environ, COLLCHECK="1", COLLCHECK_RUN_ID=os.environ.get("COLLCHECK_RUN_ID") or new_run_id())
    if args.dir:
        env["COLLCHECK_DIR"] = args.dir
    try:
        rc = subprocess.call(args.command, env=env)
    except FileNotFoundError:
        raise UsageError(f"collcheck record: command not found: {args.command[0]}") from None
    directory = os.path.join(env.get("COLLCHECK_DIR", "collcheck-logs"), env["COLLCHECK_RUN_ID"])
    print(f"collcheck: logs in {directory} (command exited with {rc})", file=sys.stderr)
    return rc


def cmd_show(args) -> int:
    """Print one rank's log as a table."""
    from ..report.show import show

    show(args.log, sys.stdout, limit=args.limit)
    return OK


def cmd_stats(args) -> int:
    """Where communication time goes: per call site, op and group; stragglers; what to change."""
    from ..model import load_run
    from ..report.stats import render
    from ..stats.summary import compute

    render(compute(load_run(latest_run(args.logs))), args.format, sys.stdout, top=args.top)
    return OK


def cmd_diff(args) -> int:
    """Align the ranks' collectives, report the first divergence and any hang."""
    from ..analysis.diff import analyse
    from ..model import load_run
    from ..report import render

    run = load_run(latest_run(args.logs))
    report = analyse(run)
    out = open(args.output, "w") if args.output else sys.stdout
    try:
        render(report, args.format, out, context=args.context)
    finally:
        if args.output:
            out.close()
    if args.exit_zero:
        return OK
    return FINDINGS if report.findings else INCOMPLETE if report.verdict == "incomplete" else OK


def cmd_export(args) -> int:
    """Write a run (or Flight Recorder dumps) as a Perfetto trace or as Flight Recorder dumps."""
    from ..model import load_run

    run = load_run(latest_run(args.logs))
    if args.format == "fr":
        from ..report import fr_export

        paths = fr_export.write(run, args.output)
        print(f"wrote {len(paths)} Flight Recorder dumps to {args.output} (torchfrtrace {args.output} -p rank_)")
        return OK
    from ..analysis.diff import analyse
    from ..report import perfetto
    from ..stats.summary import compute

    with open(args.output, "w") as out:
        perfetto.write(analyse(run), out, compute(run))
    print(f"wrote {args.output}: open it in https://ui.perfetto.dev")
    return OK


def cmd_tui(args) -> int:
    """Explore a run in a terminal UI: overview, side-by-side timelines, wait-for graph, step mode."""
    from ..tui.app import run_tui

    return run_tui(args.logs)


def cmd_demo(args) -> int:
    """Record a scenario under torchrun, then diff it."""
    from .demo import run_demo

    return run_demo(args.name, args.dir, keep=args.keep, backend=args.backend)


def cmd_build_fastpath(args) -> int:
    """Compile the recording fast path with the installed torch now (the first command does it
    otherwise); --status: is it in use, and if not, why."""
    from ..capture.native import build as autobuild

    return autobuild.command(args.status, args.verbose)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="collcheck", description=__doc__.split("\n")[0])
    from ..base import __version__

    p.add_argument("--version", action="version", version=f"collcheck {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help=cmd_record.__doc__)
    r.add_argument("--dir", help="log directory (COLLCHECK_DIR, default ./collcheck-logs)")
    r.add_argument("command", nargs=argparse.REMAINDER)
    r.set_defaults(func=cmd_record)
    s = sub.add_parser("show", help=cmd_show.__doc__)
    s.add_argument("log")
    s.add_argument("--limit", type=int, default=0, help="show only the last N collectives")
    s.set_defaults(func=cmd_show)
    d = sub.add_parser("diff", help=cmd_diff.__doc__)
    d.add_argument("logs", help="run directory (or a logs root: the newest run is used), or a directory of PyTorch Flight Recorder dumps")
    d.add_argument("--format", choices=["text", "json", "junit", "github"], default="text")
    d.add_argument("--output", "-o", help="write the report to this file")
    d.add_argument("--context", type=int, default=4, help="collectives shown around the divergence")
    d.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings or unchecked ranks")
    d.set_defaults(func=cmd_diff)
    st = sub.add_parser("stats", help=cmd_stats.__doc__)
    st.add_argument("logs", help="run directory (or a logs root: the newest run is used), or a directory of PyTorch Flight Recorder dumps")
    st.add_argument("--format", choices=["text", "json"], default="text")
    st.add_argument("--top", type=int, default=20, help="call sites shown in the table (most time first)")
    st.set_defaults(func=cmd_stats)
    x = sub.add_parser("export", help=cmd_export.__doc__)
    x.add_argument("logs", help="run directory (or a logs root: the newest run is used), or a directory of PyTorch Flight Recorder dumps")
    x.add_argument("--format", choices=["perfetto", "fr"], default="perfetto",
                   help="perfetto: a trace JSON file; fr: a directory of Flight Recorder dumps (rank_<rank>)")
    x.add_argument("--output", "-o", required=True, help="the trace file (perfetto) or directory (fr)")
    x.set_defaults(func=cmd_export)
    t = sub.add_parser("tui", help=cmd_tui.__doc__)
    t.add_argument("logs", help="run directory (or a logs root: the newest run is used), or a directory of PyTorch Flight Recorder dumps")
    t.set_defaults(func=cmd_tui)
    from .replay import add_parser as add_replay

    add_replay(sub)
    from .demo import DEFAULT_DEMO

    m = sub.add_parser("demo", help=cmd_demo.__doc__)
    m.add_argument("name", nargs="?", default=DEFAULT_DEMO, help=f"scenario name (default {DEFAULT_DEMO})")
    m.add_argument("--dir", default=None, help="where to keep the logs (default: a temporary directory)")
    m.add_argument("--keep", action="store_true", help="keep the logs")
    m.add_argument("--backend", choices=("gloo", "simnccl"), default="gloo",
                   help="simnccl: run it on the simulated NCCL backend (calls return at once, nothing is checked)")
    m.set_defaults(func=cmd_demo)
    b = sub.add_parser("build-fastpath", help=cmd_build_fastpath.__doc__)
    b.add_argument("--status", action="store_true", help="only say whether it is built and in use, or why not (exit 1 if not built)")
    b.add_argument("--verbose", action="store_true", help="show the compiler's output")
    b.set_defaults(func=cmd_build_fastpath)
    return p


def main(argv=None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    if args.cmd != "build-fastpath":  # the compiled recording path, built once without an extra step
        from ..capture.native import build as autobuild

        autobuild.start(foreground=args.cmd in ("record", "demo"))  # these launch jobs at once
    return run_command(lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
