"""`collcheck lint`: the rank-dependent branch found before the job runs.

A static reading of the training script (the standard library's `ast`; nothing is imported or
run): each call that issues collectives (torch.distributed, functional collectives, DTensor,
distributed checkpointing, a DDP/FSDP model's forward and backward, the framework calls the
framework tables know, the program's own functions that reach any of these, and with `--logs`
whatever a recorded run's call chains show) and that runs only where a per-rank condition lets
it: a rank (`dist.get_rank()`, `RANK`, `is_main_process`, `@rank_zero_only`) or this rank's data
(`isnan` of a local loss, a batch's length, a loop over a per-rank iterable).

program (files, imports, functions) -> values/expressions (what an expression is) -> flow (one
function's statements) -> interprocedural (all functions, until nothing changes) -> findings.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field

from .findings import Finding
from .interprocedural import Lint
from .program import load


@dataclass
class LintResult:
    findings: list[Finding]
    files: int
    lines: int
    seconds: float
    skipped: list[str] = field(default_factory=list)  # "path: why" for files not read
    learned: int = 0  # call sites a recorded run added
    libraries: list = field(default_factory=list)  # installed packages read: {package, version, from, modules}


def lint_paths(paths: list[str], learned=(), logs: str | None = None, libraries: bool = True,
               cache_dir: str | None = None, search_path: list[str] | None = None) -> LintResult:
    """Lint Python files and folders. `logs`: a recorded run whose call chains add the calls
    they show issuing collectives; `learned`: such calls given directly (learn.Learned);
    `libraries`: follow calls into installed packages (found on `search_path`, default sys.path),
    their summaries cached under `cache_dir` (None: not cached)."""
    from .libraries import Libraries

    start = time.perf_counter()
    collecting = gc.isenabled()
    gc.disable()  # millions of long-lived AST nodes: the cyclic collector would walk them again and again
    try:
        program = load([str(p) for p in paths])
        known = learned or None
        if logs is not None:
            from .learn import learn_from_run

            known = learn_from_run(logs, program)
        read = Libraries(cache_dir, search_path) if libraries else None
        findings = Lint(program, known, read).run()
    finally:
        if collecting:
            gc.enable()
    return LintResult(findings, len(program.modules), program.lines, time.perf_counter() - start,
                      program.skipped, len(known.sites) if known else 0, read.read if read is not None else [])


__all__ = ["Finding", "LintResult", "lint_paths"]
