"""The real command line, run in the test's process: `main(argv)` with stdout and stderr captured
(a subprocess per call would cost an interpreter start; tests/integration/test_cli_processes.py
runs it as users do, in processes of its own)."""

from __future__ import annotations

import contextlib
import io
import json
import os
from dataclasses import dataclass

from collcheck.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str


@contextlib.contextmanager
def environment(env: dict | None):
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_cli(*argv: str, env: dict | None = None, columns: int | None = None) -> Result:
    """`collcheck ARGV...`; `columns`: the terminal's width (COLUMNS)."""
    out, err = io.StringIO(), io.StringIO()
    extra = dict(env or {}, **({"COLUMNS": str(columns)} if columns else {}))
    with environment(extra), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return Result(code, out.getvalue(), err.getvalue())


def diff_json(run_dir: str, codes=(0, 1), env: dict | None = None) -> tuple[int, dict]:
    """`collcheck diff RUN --format json`: (exit code, the report)."""
    res = run_cli("diff", run_dir, "--format", "json", env=env)
    assert res.code in codes, (res.code, res.err)
    return res.code, json.loads(res.out)


def diff_text(run_dir: str, columns: int = 250, env: dict | None = None) -> str:
    return run_cli("diff", run_dir, env=env, columns=columns).out


def stats_json(run_dir: str) -> dict:
    res = run_cli("stats", run_dir, "--format", "json")
    assert res.code == 0, res.err[-3000:]
    return json.loads(res.out)
