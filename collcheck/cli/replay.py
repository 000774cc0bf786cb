"""`collcheck replay RUN_DIR`: re-issue the recorded collectives on local gloo processes.

Exit codes: 0 the replay completed with no finding, 1 it has findings (hang, error or
mismatch), 2 usage or input error (as `collcheck diff`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

from ..base.errors import UsageError
from ..base.untrusted import one_line, visible

AUTO_ABOVE = 8  # default --ranks: all up to this world size, auto above
MAX_PROCESSES = 64


def add_parser(subparsers):
    p = subparsers.add_parser("replay", help="Replay a recorded run's collectives on local gloo processes",
                              description=__doc__.split("\n")[0])
    p.add_argument("logs", help="run directory (or a logs root: the newest run is used), or a directory of PyTorch Flight Recorder dumps")
    p.add_argument("--ranks", default=None,
                   help="recorded ranks to replay: 'all', 'auto' (those involved in the first finding; default "
                        f"above {AUTO_ABOVE} ranks) or a list like 0,3,5-7")
    p.add_argument("--shrink", nargs="?", type=int, const=64, default=None, metavar="N",
                   help="cap tensors at about N elements (default 64), keeping every size relation across ranks")
    p.add_argument("--timeout", type=float, default=5.0, help="process-group timeout of the replay, seconds (5)")
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
    p.add_argument("--emit-script", metavar="PATH", help="write a standalone torch program that reproduces the finding")
    p.add_argument("--no-minimize", action="store_true", help="with --emit-script: keep every recorded collective")
    p.add_argument("--max-tests", type=int, default=40, help="minimization: at most this many trial replays (40)")
    p.add_argument("--keep", metavar="DIR", help="keep the replay's plan, logs and outputs in DIR")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--verbose", "-v", action="store_true", help="print each replayed op and minimization step")
    p.set_defaults(func=cmd_replay)
    return p


def parse_ranks(text: str, world: int) -> list[int]:
    out = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                a, b = part.split("-")
                out.update(range(int(a), int(b) + 1))
            else:
                out.add(int(part))
    except ValueError:
        raise UsageError(f"--ranks {text!r}: expected all, auto or a list like 0,3,5-7") from None
    bad = sorted(r for r in out if not 0 <= r < world)
    if bad or not out:
        raise UsageError(f"--ranks {text!r}: ranks must be in 0..{world - 1}")
    return sorted(out)


def cmd_replay(args) -> int:
    from ..analysis.diff import analyse
    from ..logfile.reader import latest_run
    from ..model import load_run
    from ..replay.plan import build_plan, involved_ranks
    from ..replay.runner import finding_key
    from ..replay.whatif import parse_edit

    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    if args.shrink is not None and args.shrink < 1:
        raise UsageError("--shrink must be at least 1")
    if args.emit_script:
        from ..replay.minimize import check_script_path

        check_script_path(args.emit_script)  # before the replay, not after minutes of it
    run = load_run(latest_run(args.logs))
    original = analyse(run)
    first = original.first
    out = Printer(args.format != "json")
    edits = [parse_edit(k, v) for k in ("drop", "insert", "move") for v in getattr(args, k)]

    # which ranks
    mode = args.ranks or ("auto" if run.world > AUTO_ABOVE else "all")
    scale_note = None
    if mode == "all":
        ranks = sorted(run.ranks)
    elif mode == "auto":
        if first is None:
            ranks = sorted(run.ranks)
            scale_note = "the recording has no finding: nothing to scale down to; replaying every rank"
        else:
            ranks, why = involved_ranks(run, first)
            if len(ranks) >= len(run.ranks):
                scale_note = (f"cannot scale down: the first finding ({first.kind}) involves all "
                              f"{len(run.ranks)} ranks ({why})")
            else:
                scale_note = f"scaled down to recorded ranks {_ranges(ranks)}: {why}"
    else:
        ranks = parse_ranks(mode, run.world)
    for e in edits:
        if e.rank not in ranks:
            ranks = sorted(set(ranks) | {e.rank})
    if len(ranks) > MAX_PROCESSES:
        raise UsageError(f"replaying {len(ranks)} ranks needs {len(ranks)} local processes (limit {MAX_PROCESSES}); "
                         + (scale_note + "; " if scale_note else "") + "select fewer with --ranks")
    plan = build_plan(run, ranks, shrink=args.shrink, timeout_s=args.timeout, edits=edits, follow=not args.no_follow)
    plan.backend = args.backend

    work = args.keep or tempfile.mkdtemp(prefix="collcheck-replay-")
    try:
        return _replay(args, run, original, plan, edits, scale_note, work, out, finding_key)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _replay(args, run, original, plan, edits, scale_note, work, out, finding_key) -> int:
    from ..replay.minimize import Minimizer, emit_script
    from ..replay.runner import describe_exit, run_plan, site_key

    first = original.first
    orig_key = finding_key(first) if first else None
    out.line(f"collcheck replay: {one_line(run.directory)}  ({len(run.ranks)} recorded ranks, "
             f"verdict {original.verdict.upper()})")
    if first is not None:
        out.line(f"recorded first finding: {_key_text(orig_key)}")
    if scale_note:
        out.line(one_line(scale_note))
    for e in edits:
        out.line(f"what-if: {e.describe()}")
    for n in plan.notes:
        out.line(f"note: {one_line(n)}")
    out.line(f"replaying {plan.n_ops()} collective(s) on {plan.world} {plan.backend} process(es), timeout {plan.timeout_s:g} s ...")
    o = run_plan(plan, os.path.join(work, "replay"), verbose=args.verbose)
    got = o.first_key()
    status = o.status
    out.line(f"replay {status.upper()} in {o.wall_s:.1f} s: " + ", ".join(
        f"rank {plan.rank_map[r]} {describe_exit(c)}" for r, c in enumerate(o.exit_codes)))
    for r, where in o.blocked().items():
        out.line(f"  rank {r}: {one_line(where)}")
    if o.report is None:
        out.line("the replay wrote no readable logs; its output:")
        for r, text in enumerate(o.outputs):
            out.line(f"--- rank {r}\n{visible(text[-1500:])}")
    elif got is not None:
        out.line(f"replay first finding:   {_key_text(got)}")
        out.line("  " + visible(o.report.first.message))
    else:
        out.line("replay first finding:   none")
    if edits:
        matches = None
        out.line("the what-if " + ("fixes it: the replay completes with no finding" if status == "completed" and got is None
                                    else "does not make the replay complete cleanly"))
    else:
        matches = got == orig_key and (first is not None or status == "completed")
        out.line("matches the recording: " + ("yes" if matches else "NO") + (
            "" if matches else f" (recorded {_key_text(orig_key)}, replayed {_key_text(got)})"))
        if not matches and plan.world < len(run.ranks):
            out.line("the scaled-down replay does not reproduce the recording: replay more ranks (--ranks all)")

    script = None
    if args.emit_script:
        final = plan
        mini = ""
        if first is not None and not args.no_minimize and o.report is not None and o.report.first is not None:
            target = (first.kind, first.group, tuple(sorted(first.ranks)), site_key(first))
            replay_target = (got[0], got[1], got[3], site_key(o.report.first)) if got else None
            if replay_target != target:
                out.line("not minimizing: the replay does not reproduce the recorded finding")
            else:
                out.line(f"minimizing (delta debugging, at most {args.max_tests} trial replays) ...")
                m = Minimizer(plan, target, _mkdir(os.path.join(work, "minimize")),
                              timeout_s=min(plan.timeout_s, 2.0), max_tests=args.max_tests,
                              log=out.line if args.verbose else None)
                final = m.run(first.group, first.position)
                final.timeout_s = plan.timeout_s
                mini = f", minimized from {plan.n_ops()} by delta debugging ({m.tests} trial replays)"
                out.line(f"kept {final.n_ops()} of {plan.n_ops()} collective(s) after {m.tests} trial replay(s)")
        text = f"Recorded first finding: {_key_text(orig_key)}" if first else "The recording has no finding."
        if first is not None:
            text += "\n  " + first.message  # data in the script, never its code (minimize.emit_script)
        emit_script(final, args.emit_script, text, mini)
        script = args.emit_script
        out.line(f"wrote {one_line(script)}: run it with  torchrun --nproc-per-node {final.world} {one_line(script)}")

    if args.format == "json":
        doc = {"run": run.directory, "status": status, "world": plan.world, "rank_map": plan.rank_map,
               "recorded": _key_json(orig_key), "replayed": _key_json(got), "matches": matches,
               "edits": [e.describe() for e in edits], "scale": scale_note, "notes": plan.notes,
               "exit_codes": o.exit_codes, "blocked": {str(k): v for k, v in o.blocked().items()},
               "collectives": plan.n_ops(), "script": script, "seconds": round(o.wall_s, 2)}
        print(json.dumps(doc, indent=1))
    return 0 if status == "completed" and got is None else 1


def _mkdir(path):
    os.makedirs(path, exist_ok=True)
    return path


def _key_text(key) -> str:
    if key is None:
        return "none"
    kind, group, position, ranks = key
    return f"{one_line(kind)} in group {one_line(group)} at #{position}, culprit rank(s) {_ranges(ranks)}"


def _key_json(key):
    if key is None:
        return None
    kind, group, position, ranks = key
    return {"kind": kind, "group": group, "position": position, "ranks": list(ranks)}


def _ranges(ranks) -> str:
    from ..model import rank_ranges

    return rank_ranges(list(ranks))


class Printer:
    """The replay's progress lines (stdout; stderr with --format json). Log-derived fields are escaped
    where each line is built; `visible` here is the last guard: no control character reaches the
    terminal whatever a caller forgot."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def line(self, text: str) -> None:
        print(visible(text, limit=1 << 16), file=sys.stdout if self.enabled else sys.stderr, flush=True)
