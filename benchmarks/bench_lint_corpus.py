"""The lint corpus's ground truth and `collcheck lint`'s results on it.

    python benchmarks/bench_lint_corpus.py --run                 # run every program, check its truth
    python benchmarks/bench_lint_corpus.py --lint                # lint every program, against the manifest
    python benchmarks/bench_lint_corpus.py --run --only bug_dcp --jobs 2 --json results.json

The corpus (tests/unit/lint/corpus/, its ground truth in manifest.json) holds small standalone
programs for 2 ranks: correct ones built around the shapes the lint must leave alone (a
collective on a group of exactly the branch's ranks, a value a collective made the same on every
rank, a call that issues collectives only in some configurations, point-to-point pairs...) and
buggy ones across torch.distributed, DDP, FSDP2, DTensor, DeviceMesh, distributed checkpointing,
Lightning, accelerate, the transformers Trainer, torchmetrics and a user's helper package.

`--run` runs each program once under torchrun (2 ranks, gloo, CPU, no COLLCHECK): the programs
read their gloo timeout from CORPUS_TIMEOUT_S (default 5 s) so the buggy ones end by themselves;
`--timeout` kills a program's whole process tree past it. A correct program must exit 0. A buggy
one must fail the way a collective mismatch does (a gloo timeout, a size mismatch gloo aborts on,
a connection its peer closed, exit 3 where the program compared its results across ranks, or a
hang killed at `--timeout`); one that exits 0, or fails with any other error (a bug in the
program itself), does not confirm its truth. Exit 1 if any program's truth is not confirmed.

`--lint` runs `python -m collcheck lint PROGRAM --format json` on each (a package's folder
whole), the collcheck this Python imports. A finding's severity is the JSON's where it gives one
("error" otherwise: today every finding fails a CI job). A correct program with an error is a
false alarm; a buggy program is found when each expected finding (its call's line and its
condition's, or the call alone where there is no condition) is reported. The table also says
where the result differs from the manifest's `lint_gap` (the programs
tests/unit/lint/test_lint_corpus.py holds as strict xfails). Exits 0: this measures.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "unit" / "lint" / "corpus"
SCRUBBED = ("COLLCHECK", "COLLCHECK_DIR", "COLLCHECK_RUN_ID", "TORCHELASTIC_RUN_ID", "TORCH_DISTRIBUTED_DEBUG")
# how a buggy program fails when its ranks' collectives do not match, as gloo and the programs say it
SIGNALS = (("divergence detected (exit 3)", re.compile(r"exitcode\s*:\s*3\b")),
           ("gloo size mismatch", re.compile(r"Received data size doesn't match")),
           ("gloo timeout", re.compile(r"Timed out waiting \d+ms|Application timeout caused pair closure")),
           ("peer closed the connection", re.compile(r"Connection (?:closed|reset) by peer")))
EXCEPTION = re.compile(r"^\[rank\d+\]: ([\w.]+(?:Error|Exception)): (.*)$", re.M)
DISTRIBUTED_ERROR = re.compile(r"gloo|Timed out|Connection (?:closed|reset)|pair closure|Received data size")


def manifest() -> dict:
    return json.loads((CORPUS / "manifest.json").read_text())["programs"]


def script_of(name: str) -> Path:
    """The file torchrun runs: the program, or a package program's main.py."""
    path = CORPUS / name
    return path / "main.py" if path.is_dir() else path


_ports = itertools.count((os.getpid() * 97) % 12000)
_ports_lock = threading.Lock()


def free_port() -> int:
    """A port below the kernel's ephemeral range (a gloo connection cannot take it back first)."""
    with _ports_lock:
        while True:
            port = 20000 + next(_ports) % 12000
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port


def launch(name: str, work: str, timeout: float, gloo_timeout: float) -> tuple[int | None, str, float]:
    """(torchrun's exit code, None past `timeout`; its output; seconds) of one program."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", CORPUS_TIMEOUT_S=str(gloo_timeout), CORPUS_OUT=work)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), "--max-restarts", "0", str(script_of(name))]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        rc, out = None, ""
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the ranks and whatever they left behind
    except (ProcessLookupError, PermissionError):
        pass
    if rc is None:
        out = proc.communicate()[0]
    return rc, out, time.monotonic() - start


def outcome(rc: int | None, output: str, timeout: float) -> tuple[str, bool]:
    """(what happened, whether it is a distributed failure: a collective mismatch's way to fail)."""
    if rc == 0:
        return "exit 0", False
    if rc is None:
        return f"hang: killed after {timeout:.0f} s", True
    other = sorted({f"{kind}: {message[:80]}" for kind, message in EXCEPTION.findall(output)
                    if not DISTRIBUTED_ERROR.search(message)})
    if other:
        return f"exit {rc}, program error: {'; '.join(other)}", False
    seen = [label for label, pattern in SIGNALS if pattern.search(output)]
    return (f"exit {rc}: {', '.join(seen)}", True) if seen else (f"exit {rc}, no collective error seen", False)


def run_one(name: str, truth: str, args) -> dict:
    with tempfile.TemporaryDirectory(prefix="collcheck-lint-corpus-") as work:
        rc, output, seconds = launch(name, work, args.timeout, args.gloo_timeout)
    said, distributed = outcome(rc, output, args.timeout)
    confirmed = rc == 0 if truth == "correct" else (rc != 0 and distributed)
    result = {"name": name, "truth": truth, "rc": rc, "outcome": said, "confirmed": confirmed, "seconds": round(seconds, 1)}
    if not confirmed:
        result["output_tail"] = output[-3000:]
    return result


def run_all(programs: dict, args) -> list[dict]:
    print(f"ground truth: {len(programs)} programs, 2 gloo ranks each, gloo timeout {args.gloo_timeout:g} s, "
          f"killed past {args.timeout:g} s, {args.jobs} at once", flush=True)
    start = time.monotonic()
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, name, entry["truth"], args) for name, entry in programs.items()]
        results = []
        for future in futures:
            r = future.result()
            results.append(r)
            mark = "ok  " if r["confirmed"] else "FAIL"
            observed = programs[r["name"]].get("observed")
            note = "" if observed in (None, r["outcome"]) else f"  (manifest: {observed})"
            print(f"{mark} {r['name']:<42} {r['truth']:<8} {r['seconds']:5.1f} s  {r['outcome']}{note}", flush=True)
            if not r["confirmed"]:
                print("     " + r["output_tail"][-1500:].replace("\n", "\n     "))
    confirmed = sum(r["confirmed"] for r in results)
    by_truth = {t: sum(r["truth"] == t for r in results) for t in ("correct", "buggy")}
    print(f"ground truth: {confirmed}/{len(results)} confirmed ({by_truth['correct']} correct, {by_truth['buggy']} "
          f"buggy), {time.monotonic() - start:.0f} s wall, {sum(r['seconds'] for r in results):.0f} s of programs")
    return results


def lint_one(name: str) -> dict:
    """The findings of `collcheck lint` on one program (a package program: its folder)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "collcheck", "lint", str(CORPUS / name), "--format", "json"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    seconds = time.monotonic() - start
    if proc.returncode not in (0, 1):
        return {"name": name, "error": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}", "findings": [],
                "seconds": seconds}
    report = json.loads(proc.stdout)
    main = script_of(name).resolve()
    findings = [{"line": f["line"], "cond": f["branch"]["line"], "severity": f.get("severity", "error"),
                 "how": f["branch"]["how"], "kind": f["kind"], "here": (ROOT / f["file"]).resolve() == main}
                for f in report["findings"]]
    return {"name": name, "findings": findings, "seconds": seconds, "lint_seconds": report["seconds"]}


def matches(finding: dict, expected: dict) -> bool:
    return finding["here"] and finding["line"] == expected["call"] and expected["cond"] in (None, finding["cond"])


def verdict(entry: dict, findings: list[dict]) -> tuple[str, bool]:
    """(what lint did on the program, whether that meets the target: quiet on correct, found on buggy)."""
    errors = [f for f in findings if f["severity"] == "error"]
    if entry["truth"] == "correct":
        if errors:
            return f"FALSE ALARM ({len(errors)} error{'s' * (len(errors) > 1)})", False
        return ("quiet", True) if not findings else (f"{len(findings)} warning(s) only", True)
    missing = [e for e in entry["expect"] if not any(matches(f, e) for f in findings)]
    extra = [f for f in errors if not any(matches(f, e) for e in entry["expect"])]
    said = "MISSED" if missing else "found"
    return (said + (f", {len(extra)} extra error(s)" if extra else ""), not missing and not extra)


def shown(findings: list[dict]) -> str:
    return ", ".join(f"{f['line'] if f['here'] else '(other file) ' + str(f['line'])}/{f['cond']} "
                     f"{f['severity']} {f['how']}" for f in findings) or "-"


def lint_all(programs: dict) -> list[dict]:
    results = [lint_one(name) for name in programs]
    print(f"{'program':<42} {'truth':<8} {'expected call/cond':<18} {'findings (call/cond severity how)':<44} verdict")
    for r in results:
        entry = programs[r["name"]]
        said, met = verdict(entry, r["findings"]) if "error" not in r else (f"LINT ERROR {r['error']}", False)
        known = entry.get("lint_gap") is not None
        note = "" if met != known else ("  (meets the target: drop its lint_gap)" if met else "  (not in lint_gap)")
        r.update(verdict=said, met=met)
        expected = ", ".join(f"{e['call']}/{e['cond'] or '-'}" for e in entry["expect"]) or "-"
        print(f"{r['name']:<42} {entry['truth']:<8} {expected:<18} {shown(r['findings']):<44} {said}{note}")
    correct = [r for r in results if programs[r["name"]]["truth"] == "correct"]
    buggy = [r for r in results if programs[r["name"]]["truth"] == "buggy"]
    alarms = [r["name"] for r in correct if not r["met"]]
    found = [r for r in buggy if r["verdict"].startswith("found")]
    missed = [r["name"] for r in buggy if not r["verdict"].startswith("found")]
    print(f"correct programs: {len(correct)}, with an error finding (false alarms): {len(alarms)}"
          + (f" ({', '.join(alarms)})" if alarms else ""))
    print(f"buggy programs: {len(buggy)}, found at the expected lines: {len(found)} (recall {len(found) / max(len(buggy), 1):.0%}), "
          f"missed: {len(missed)}" + (f" ({', '.join(missed)})" if missed else ""))
    by_severity = {"error": 0, "warning": 0}
    for r in found:  # the severity lint gave each bug it found (an error when any expected finding is one)
        hits = [f for e in programs[r["name"]]["expect"] for f in r["findings"] if matches(f, e)]
        by_severity["error" if any(f["severity"] == "error" for f in hits) else "warning"] += 1
    print(f"   of those found: {by_severity['error']} as errors, {by_severity['warning']} as warnings only")
    warned = [r["name"] for r in correct if r["verdict"].endswith("warning(s) only")]
    print(f"correct programs with warnings only: {len(warned)}" + (f" ({', '.join(warned)})" if warned else ""))
    extra = [r["name"] for r in found if "extra" in r["verdict"]]
    print(f"buggy programs with extra error findings: {len(extra)}" + (f" ({', '.join(extra)})" if extra else ""))
    print(f"lint: {sum(r['seconds'] for r in results):.1f} s wall for {len(results)} commands, "
          f"{sum(r.get('lint_seconds', 0) for r in results):.2f} s inside lint")
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_lint_corpus.py", description=__doc__.split("\n")[0])
    p.add_argument("--run", action="store_true", help="run every program under torchrun and check its truth")
    p.add_argument("--lint", action="store_true", help="lint every program and compare with the manifest")
    p.add_argument("--only", action="append", default=[], help="programs whose name contains this (repeatable)")
    p.add_argument("--jobs", type=int, default=1, help="programs run at once (--run)")
    p.add_argument("--timeout", type=float, default=90, help="seconds before a program's processes are killed")
    p.add_argument("--gloo-timeout", type=float, default=5, help="the programs' process-group timeout (CORPUS_TIMEOUT_S)")
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args(argv)
    if not (args.run or args.lint):
        p.error("say --run, --lint or both")
    programs = {n: e for n, e in manifest().items() if not args.only or any(o in n for o in args.only)}
    if not programs:
        p.error(f"no program matches {args.only}")
    out, status = {}, 0
    if args.run:
        out["run"] = run_all(programs, args)
        status = 0 if all(r["confirmed"] for r in out["run"]) else 1
    if args.lint:
        out["lint"] = lint_all(programs)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
