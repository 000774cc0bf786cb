"""`collcheck replay RUN_DIR`: re-issue the recorded collectives on local gloo processes.

Exit codes: 0 the replay completed with no finding, 1 it has findings (hang, error or
mismatch), 2 usage or input error (as `collcheck diff`).
"""

from __future__ import annotations

import shutil
import tempfile

from ..base.errors import UsageError
from ..base.outputs import check_folder, check_output, output_folder, subfolder
from ..report.formats import formats, printer
from . import values
from .common import RUN_HELP

AUTO_ABOVE = 8  # default --ranks: all up to this world size, auto above
MAX_PROCESSES = 64
MAX_TIMEOUT = 86400.0  # seconds: a replay nobody can wait for longer is a mistake
MAX_TESTS = 10_000


def add_parser(commands) -> None:
    p = commands.add_parser("replay", help="Replay a recorded run's collectives on local gloo processes",
                              description=__doc__.split("\n")[0])
    p.add_argument("logs", type=values.path, help=RUN_HELP)
    p.add_argument("--ranks", default=None,
                   help="recorded ranks to replay: 'all', 'auto' (those involved in the first finding; default "
                        f"above {AUTO_ABOVE} ranks) or a list like 0,3,5-7")
    p.add_argument("--shrink", nargs="?", type=values.count(1, 1 << 31), const=64, default=None, metavar="N",
                   help="cap tensors at about N elements (default 64), keeping every size relation across ranks")
    p.add_argument("--timeout", type=values.seconds(MAX_TIMEOUT), default=5.0,
                   help=f"process-group timeout of the replay, seconds (5; at most {MAX_TIMEOUT:g})")
    p.add_argument("--backend", choices=("gloo", "simnccl"), default="gloo",
                   help="simnccl: replay with NCCL's semantics (calls return at once, ops pair by position "
                        "unchecked, the watchdog aborts), to reproduce what NCCL did rather than gloo")
    p.add_argument("--drop", action="append", default=[], metavar="RANK:I",
                   help="what-if: rank RANK does not issue its collective #I (`collcheck show` numbering)")
    p.add_argument("--insert", action="append", default=[], metavar="RANK:I=SRC:J",
                   help="what-if: rank RANK issues a copy of rank SRC's collective #J before its #I (I=-1: at the end)")
    p.add_argument("--move", action="append", default=[], metavar="RANK:I:J",
                   help="what-if: rank RANK issues its collective #I just before its #J (J=-1: at the end)")
    p.add_argument("--no-follow", action="store_true",
                   help="what-if: ranks cut by the hang stop where their recording stops (default: they follow "
                        "their peers' remaining collectives)")
    p.add_argument("--emit-script", type=values.path, metavar="PATH", help="write a standalone torch program that reproduces the finding")
    p.add_argument("--no-minimize", action="store_true", help="with --emit-script: keep every recorded collective")
    p.add_argument("--max-tests", type=values.count(0, MAX_TESTS), default=40, help="minimization: at most this many trial replays (40)")
    p.add_argument("--keep", type=values.path, metavar="DIR", help="keep the replay's plan, logs and outputs in DIR")
    p.add_argument("--format", choices=formats("replay"), default=formats("replay")[0])
    p.add_argument("--verbose", "-v", action="store_true", help="print each replayed op and minimization step")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Replay the run `args` names; 0 when the replay completes with no finding, else 1."""
    from ..analysis.diff import analyse
    from ..inputs.discover import discover
    from ..model import load_run
    from ..replay.plan import build_plan
    from ..replay.whatif import parse_edit

    edits = [parse_edit(k, v) for k in ("drop", "insert", "move") for v in getattr(args, k)]
    source = discover(args.logs, newest=True)
    inputs = source.inputs()
    if args.emit_script:
        check_output(args.emit_script, inputs)  # before the replay, not after minutes of it
    if args.keep:
        check_folder(args.keep, inputs)
    run = load_run(source)
    original = analyse(run)
    out = printer("replay", args.format)
    for e in edits:
        for r in (e.rank, e.other_rank):
            if r is not None and not 0 <= r < run.world:
                raise UsageError(f"--{e.kind} names rank {r}: the run's ranks are 0..{run.world - 1}")
    ranks, scale_note = choose_ranks(args.ranks, run, original.first)
    for e in edits:
        if e.rank not in ranks:
            ranks = sorted(set(ranks) | {e.rank})
    if len(ranks) > MAX_PROCESSES:
        raise UsageError(f"replaying {len(ranks)} ranks needs {len(ranks)} local processes (limit {MAX_PROCESSES}); "
                         + (scale_note + "; " if scale_note else "") + "select fewer with --ranks")
    plan = build_plan(run, ranks, shrink=args.shrink, timeout_s=args.timeout, edits=edits, follow=not args.no_follow)
    plan.backend = args.backend

    work = output_folder(args.keep, inputs) if args.keep else tempfile.mkdtemp(prefix="collcheck-replay-")
    try:
        return _replay(args, run, original, plan, edits, scale_note, work, out, inputs)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def choose_ranks(mode: str | None, run, first) -> tuple[list[int], str | None]:
    """The recorded ranks to replay for --ranks `mode`, and a note on scaling down (or None)."""
    from ..model import rank_ranges
    from ..replay.plan import involved_ranks

    mode = mode or ("auto" if run.world > AUTO_ABOVE else "all")
    if mode == "all":
        return sorted(run.ranks), None
    if mode != "auto":
        return values.rank_list(mode, run.world), None
    if first is None:
        return sorted(run.ranks), "the recording has no finding: nothing to scale down to; replaying every rank"
    ranks, why = involved_ranks(run, first)
    if len(ranks) >= len(run.ranks):
        return ranks, f"cannot scale down: the first finding ({first.kind}) involves all {len(run.ranks)} ranks ({why})"
    return ranks, f"scaled down to recorded ranks {rank_ranges(ranks)}: {why}"


def _replay(args, run, original, plan, edits, scale_note, work, out, inputs) -> int:
    from ..replay.runner import describe_exit, finding_key, run_plan
    from ..report.replay import key_json

    first = original.first
    recorded = finding_key(first) if first else None
    out.started(run, original.verdict, recorded, scale_note, edits, plan)
    o = run_plan(plan, subfolder(work, "replay"), verbose=args.verbose)
    got = o.first_key()
    out.finished(plan, o, [describe_exit(c) for c in o.exit_codes], got)
    matches = None
    if edits:
        out.what_if(o.status == "completed" and got is None)
    else:
        matches = got == recorded and (first is not None or o.status == "completed")
        out.matches(matches, recorded, got, scaled_down=plan.world < len(run.ranks))
    script = _emit_script(args, plan, first, recorded, o, got, work, out, inputs) if args.emit_script else None
    out.document({"run": run.directory, "status": o.status, "world": plan.world, "rank_map": plan.rank_map,
                  "recorded": key_json(recorded), "replayed": key_json(got), "matches": matches,
                  "edits": [e.describe() for e in edits], "scale": scale_note, "notes": plan.notes,
                  "exit_codes": o.exit_codes, "blocked": {str(k): v for k, v in o.blocked().items()},
                  "collectives": plan.n_ops(), "script": script, "seconds": round(o.wall_s, 2)})
    return 0 if o.status == "completed" and got is None else 1


def _emit_script(args, plan, first, recorded, o, got, work, out, inputs) -> str:
    """--emit-script: the plan, minimized by delta debugging unless --no-minimize, as a program."""
    from ..replay.minimize import Minimizer, emit_script
    from ..replay.runner import site_key
    from ..report.replay import script_note

    final = plan
    mini = ""
    if first is not None and not args.no_minimize and o.report is not None and o.report.first is not None:
        target = (first.kind, first.group, tuple(sorted(first.ranks)), site_key(first))
        replay_target = (got[0], got[1], got[3], site_key(o.report.first)) if got else None
        if replay_target != target:
            out.not_minimizing()
        else:
            out.minimizing(args.max_tests)
            m = Minimizer(plan, target, subfolder(work, "minimize"),
                          timeout_s=min(plan.timeout_s, 2.0), max_tests=args.max_tests,
                          log=out.line if args.verbose else None)
            final = m.run(first.group, first.position)
            final.timeout_s = plan.timeout_s
            mini = f", minimized from {plan.n_ops()} by delta debugging ({m.tests} trial replays)"
            out.minimized(final.n_ops(), plan.n_ops(), m.tests)
    emit_script(final, args.emit_script, script_note(recorded, first.message if first else None), mini, inputs)
    out.wrote_script(args.emit_script, final.world)
    return args.emit_script
