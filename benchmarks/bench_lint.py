"""Benchmark of `collcheck lint` on a synthetic training repository, and on real source trees.

    python benchmarks/bench_lint.py                      # 100,000 lines, 3 runs
    python benchmarks/bench_lint.py --lines 20000 --repeat 5 --keep /tmp/synth
    python benchmarks/bench_lint.py --tree .venv/lib/python3.11/site-packages/accelerate --repeat 1

The synthetic repository is a package of training-code modules (about 250 lines each: models,
trainers with a training loop, gradient and metric reductions, checkpointing, helpers that call
helpers in other files) written into a temporary directory. Its code has the shapes the lint must
leave alone (point-to-point calls under a rank test, both branches issuing the same collective,
a collective on a group of exactly the branch's ranks, a marked line, `local_rank != -1`, a rank
test around printing only) and a few planted bugs at known lines, one of each kind: a collective
under `if dist.get_rank() == 0:`, a call reaching a collective two functions down in two other
files, an early return on non-zero ranks, a `continue` on a non-finite local loss, accelerate's
`is_main_process`, a `@rank_zero_only` function, a loop over the length of this rank's batch.

Each run is `collcheck lint ROOT --format json` in a process of its own (wall time, the median of
`--repeat`); the findings must be exactly the planted ones (the call's file and line, and the
line of the condition), else the script says which are missing or extra and exits 1. `--tree PATH`
(repeatable; a quoted glob is one tree of its files) times the lint on a real tree instead and
prints its findings count. The collcheck
that runs is the one this Python imports (PYTHONPATH), or `--source DIR`'s.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PACKAGES = ("models", "data", "train", "utils")
PLANTS = ("direct", "chain", "early_return", "nonfinite", "accelerate", "rank_zero_only", "batch_length")
QUIET = ("p2p", "both_branches", "group_members", "marked", "distributed_check")


def _pkg(i: int) -> str:
    return PACKAGES[i % len(PACKAGES)]


def _import(j: int, *names: str) -> str:
    return f"from synthrepo.{_pkg(j)}.mod_{j:04d} import {', '.join(names)}"


class Source:
    """Lines of one module, with the line numbers of the planted calls and their conditions."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.planted: list[tuple[int, int, str]] = []  # (call line, condition line, kind)

    def add(self, text: str) -> None:
        self.lines.extend(text.strip("\n").split("\n") + ["", ""])

    def mark(self, kind: str) -> None:
        """The last block added holds `# <call>` and `# <cond>` markers: record their lines."""
        call = cond = 0
        for n, line in enumerate(self.lines, 1):
            if line.endswith("  # <call>"):
                call, self.lines[n - 1] = n, line[: -len("  # <call>")]
            elif line.endswith("  # <cond>"):
                cond, self.lines[n - 1] = n, line[: -len("  # <cond>")]
        self.planted.append((call, cond, kind))


def _header(i: int, s: Source) -> None:
    imports = [_import(j, f"reduce_{j}", f"helper_{j}_0") for j in sorted({i - 1, i // 2, i - 3}) if 0 <= j < i]
    s.add(f'''
"""Synthetic training module {i}: a model block, a trainer and helpers."""

import math
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
''' + "\n".join(imports) + '''

LOCAL_RANK = int(os.environ.get("LOCAL_RANK", -1))
CHECKPOINT_DIR = os.environ.get("CHECKPOINT_DIR", "/tmp/ckpt")
''')


def _helpers(i: int, s: Source) -> None:
    callee = f"helper_{i - 1}_0" if i else "math.tanh"
    reducer = f"reduce_{i - 1}" if i else f"reduce_{i}"
    s.add(f'''
def reduce_{i}(tensor):
    """The mean of a tensor over all ranks."""
    dist.all_reduce(tensor)
    return tensor / dist.get_world_size()


def consolidate_{i}(state):
    """Average every floating-point entry of a state dict (collectives on every rank)."""
    for key in sorted(state):
        value = state[key]
        if torch.is_floating_point(value):
            state[key] = {reducer}(value.clone())
    return state


def checkpoint_{i}(model, path):
    """Consolidate the model's state on every rank; rank 0 writes it."""
    state = consolidate_{i}(dict(model.state_dict()))
    if dist.get_rank() == 0:
        torch.save(state, path)
''')
    for h in range(6):
        s.add(f'''
def helper_{i}_{h}(x, scale=1.0):
    """Helper {h} of module {i}: a small numeric kernel."""
    total = 0.0
    for n in range(1, 5):
        total += math.sin(x * n) * scale / n
    if total > 0.5:
        total = {callee if h == 0 else f"helper_{i}_{h - 1}"}(total)
    elif total < -0.5:
        total = -total
    values = [total * k for k in range(3)]
    return sum(values) / len(values)
''')


def _model(i: int, s: Source) -> None:
    s.add(f'''
class Block{i}(nn.Module):
    """A residual block."""

    def __init__(self, dim, depth=2):
        super().__init__()
        self.dim = dim
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        h = x
        for layer in self.layers:
            h = torch.relu(layer(h)) + h
        return self.norm(h)
''')


def _trainer(i: int, s: Source) -> None:
    s.add(f'''
class Trainer{i}:
    """Data-parallel training of Block{i}."""

    def __init__(self, model, optimizer, rank, world_size):
        self.model = DDP(model)
        self.optimizer = optimizer
        self.rank = rank
        self.world_size = world_size
        self.step = 0
        self.history = []

    def train_epoch(self, train_loader):
        self.model.train()
        for batch in train_loader:
            self.optimizer.zero_grad()
            loss = self.model(batch).pow(2).mean()
            loss.backward()
            self.optimizer.step()
            self.step += 1
            if self.step % 50 == 0:
                self.log_metrics(loss.detach())
        return self.step

    def log_metrics(self, loss):
        value = reduce_{i}(loss)
        self.history.append(float(value))
        if self.rank == 0:
            print(f"step {{self.step}}: loss {{float(value):.4f}}")

    def evaluate(self, val_loader):
        self.model.eval()
        total = torch.zeros(2)
        with torch.no_grad():
            for batch in val_loader:
                out = self.model(batch)
                total[0] += out.sum()
                total[1] += out.numel()
        dist.all_reduce(total)
        return float(total[0] / total[1])

    def save(self, path):
        dist.barrier()
        checkpoint_{i}(self.model, path)
        dist.barrier()
''')


def _main(i: int, s: Source) -> None:
    s.add(f'''
def main_{i}(dataset, epochs=2):
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = Block{i}(16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    trainer = Trainer{i}(model, optimizer, rank, world_size)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, sampler=sampler, batch_size=8)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        trainer.train_epoch(loader)
        score = trainer.evaluate(loader)
        if rank == 0:
            print(f"epoch {{epoch}}: {{score:.4f}}")
        trainer.save(os.path.join(CHECKPOINT_DIR, f"epoch{{epoch}}.pt"))
    dist.destroy_process_group()
''')


def _quiet(i: int, s: Source, kind: str) -> None:
    """Intended one-rank code the lint must leave alone."""
    body = {
        "p2p": '''
    if rank == 0:
        dist.send(tensor, dst=1)
    elif rank == 1:
        dist.recv(tensor, src=0)''',
        "both_branches": '''
    if rank == 0:
        dist.broadcast(tensor, src=0)
    else:
        dist.broadcast(tensor, src=0)''',
        "group_members": '''
    pair = [0, 1]
    group = dist.new_group(pair)
    if rank in pair:
        dist.all_reduce(tensor, group=group)''',
        "marked": '''
    if rank == 0:
        dist.barrier()  # collcheck: ignore[rank-branch]''',
        "distributed_check": '''
    if LOCAL_RANK != -1:
        dist.barrier()'''}[kind]
    s.add(f'''
def exchange_{i}(tensor):
    """Intended: {kind.replace("_", " ")}."""
    rank = dist.get_rank()''' + body + '''
    return tensor
''')


def _plant(i: int, s: Source, kind: str, a: int, b: int) -> None:
    """One rank-dependent collective of this kind; its call and condition lines are recorded."""
    text = {
        "direct": f'''
def planted_direct_{i}(tensor):
    if dist.get_rank() == 0:  # <cond>
        dist.all_reduce(tensor)  # <call>
    return tensor
''',
        # checkpoint_a (module a) -> consolidate_a -> reduce_b (module b) -> dist.all_reduce
        "chain": f'''
{_import(a, f"checkpoint_{a}")}


def planted_chain_{i}(model):
    rank = dist.get_rank()
    if rank == 0:  # <cond>
        checkpoint_{a}(model, os.path.join(CHECKPOINT_DIR, "best.pt"))  # <call>
''',
        "early_return": f'''
class Publisher{i}:
    def __init__(self, rank):
        self.rank = rank

    def publish(self, tensor):
        if self.rank != 0:  # <cond>
            return None
        dist.broadcast(tensor, src=0)  # <call>
        return tensor
''',
        "nonfinite": f'''
def planted_nonfinite_{i}(model, train_loader):
    for batch in train_loader:
        loss = model(batch).mean()
        if not torch.isfinite(loss):  # <cond>
            continue
        dist.all_reduce(loss)  # <call>
''',
        "accelerate": f'''
def planted_accelerate_{i}():
    from accelerate import Accelerator

    accelerator = Accelerator()
    if accelerator.is_main_process:  # <cond>
        accelerator.wait_for_everyone()  # <call>
''',
        "rank_zero_only": f'''
from lightning.pytorch.utilities import rank_zero_only


@rank_zero_only  # <cond>
def planted_rank_zero_{i}(metric):
    print(float(reduce_{b}(metric)))  # <call>
''',
        "batch_length": f'''
class Module{i}:
    def training_step(self, batch, batch_idx):
        loss = torch.zeros(1)
        for k in range(len(batch)):  # <cond>
            loss = loss + reduce_{b}(batch[k].sum())  # <call>
        return loss
'''}[kind]
    s.add(text)
    s.mark(kind)


def write_repo(root: str, lines: int) -> tuple[int, int, list[tuple[str, int, int, str]]]:
    """A synthetic package of about `lines` lines under `root`: (files, lines, planted findings)."""
    pkg = os.path.join(root, "synthrepo")
    for sub in ("",) + PACKAGES:
        os.makedirs(os.path.join(pkg, sub), exist_ok=True)
        with open(os.path.join(pkg, sub, "__init__.py"), "w") as f:
            f.write('"""Synthetic training repository."""\n')
    per_module = 240  # (about: the loop below stops at `lines`)
    modules = max(len(PLANTS) + 3, round(lines / per_module))
    at = {3 + k * (modules - 3) // len(PLANTS): kind for k, kind in enumerate(PLANTS)}
    written, planted, files = len(PACKAGES) + 1, [], len(PACKAGES) + 1
    i = 0
    while i < modules or written < lines:
        s = Source()
        _header(i, s)
        _helpers(i, s)
        _model(i, s)
        _trainer(i, s)
        _main(i, s)
        _quiet(i, s, QUIET[i % len(QUIET)])
        if i in at:
            _plant(i, s, at[i], a=i - 2, b=i - 1)
        rel = os.path.join("synthrepo", _pkg(i), f"mod_{i:04d}.py")
        with open(os.path.join(root, rel), "w") as f:
            f.write("\n".join(s.lines) + "\n")
        planted += [(rel, call, cond, kind) for call, cond, kind in s.planted]
        written += len(s.lines)
        files += 1
        i += 1
    return files, written, planted


def lint(paths: list[str], source: str, cwd: str) -> tuple[float, int, dict]:
    """`collcheck lint PATHS --format json` in a process of its own: (wall s, exit status, report)."""
    env = dict(os.environ, PYTHONPATH=source + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "collcheck", "lint", *paths, "--format", "json"], check=False, cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"collcheck lint exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return wall, proc.returncode, json.loads(proc.stdout)


def check(report: dict, root: str, planted: list) -> tuple[list, list]:
    """The planted findings the report misses, and the findings it has beyond them."""
    want = {(rel, call, cond): kind for rel, call, cond, kind in planted}
    got = set()
    for f in report["findings"]:
        rel = os.path.relpath(os.path.join(root, f["file"]), root)
        got.add((rel, f["line"], f["branch"]["line"]))
    missing = sorted(f"{want[k]} at {k[0]}:{k[1]} (condition line {k[2]})" for k in want.keys() - got)
    extra = sorted(f"{k[0]}:{k[1]} (condition line {k[2]})" for k in got - want.keys())
    return missing, extra


def synthetic(args, source: str) -> int:
    root = args.keep or tempfile.mkdtemp(prefix="collcheck-bench-lint-")
    try:
        t0 = time.perf_counter()
        _, _, planted = write_repo(root, args.lines)
        write_s = time.perf_counter() - t0
        runs = [lint(["synthrepo"], source, root) for _ in range(args.repeat)]
        walls = [w for w, _, _ in runs]
        _, rc, report = runs[-1]
        missing, extra = check(report, root, planted)
        row = {"tree": f"synthetic ({len(planted)} planted)", "files": report["files"], "lines": report["lines"],
               "findings": len(report["findings"]), "wall_s": statistics.median(walls), "min_s": min(walls),
               "lint_s": statistics.median(r["seconds"] for _, _, r in runs), "write_s": write_s,
               "repeat": args.repeat}
        _print([row], args.json)
        for m in missing:
            print(f"MISSING planted finding: {m}")
        for e in extra:
            print(f"EXTRA finding (not planted): {e}")
        ok = not missing and not extra and rc == 1
        print(f"planted findings: {len(planted) - len(missing)}/{len(planted)} found, {len(extra)} extra"
              + ("" if ok else " -> FAIL"))
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def trees(args, source: str) -> int:
    rows = []
    for tree in args.tree:
        paths = sorted(glob.glob(tree)) if glob.has_magic(tree) else [tree]
        if not paths:
            raise SystemExit(f"--tree {tree}: no such files")
        runs = [lint(paths, source, os.getcwd()) for _ in range(args.repeat)]
        walls = [w for w, _, _ in runs]
        report = runs[-1][2]
        rows.append({"tree": tree, "files": report["files"], "lines": report["lines"],
                     "findings": len(report["findings"]), "wall_s": statistics.median(walls), "min_s": min(walls),
                     "lint_s": statistics.median(r["seconds"] for _, _, r in runs), "repeat": args.repeat})
    _print(rows, args.json)
    return 0


def _print(rows: list[dict], as_json: bool) -> None:
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"{'tree':<48} {'files':>6} {'lines':>9} {'findings':>8} {'wall s':>8} {'min s':>8} {'lint s':>8}")
    for r in rows:
        print(f"{r['tree'][-48:]:<48} {r['files']:>6} {r['lines']:>9,} {r['findings']:>8} {r['wall_s']:>8.2f} "
              f"{r['min_s']:>8.2f} {r['lint_s']:>8.2f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_lint.py", description=__doc__.split("\n")[0])
    p.add_argument("--lines", type=int, default=100_000, help="size of the synthetic repository (default 100000)")
    p.add_argument("--repeat", type=int, default=3, metavar="N", help="runs of each lint; the median is shown (default 3)")
    p.add_argument("--tree", action="append", metavar="PATH",
                   help="time the lint on this source tree instead (repeatable; a quoted glob such as "
                   "'pkg/trainer*.py' is one tree): files, lines, findings, seconds")
    p.add_argument("--keep", metavar="DIR", help="write the synthetic repository here and keep it")
    p.add_argument("--source", metavar="DIR",
                   help="the source tree whose collcheck runs (default: the one this Python imports)")
    p.add_argument("--json", action="store_true", help="print one JSON object per row instead of a table")
    args = p.parse_args(argv)
    spec = importlib.util.find_spec("collcheck")
    source = os.path.abspath(args.source) if args.source else \
        os.path.dirname(os.path.dirname(os.path.abspath(spec.origin))) if spec and spec.origin else None
    if source is None:
        p.error("collcheck is not importable: set PYTHONPATH or pass --source")
    if args.repeat < 1 or args.lines < 1:
        p.error("--repeat and --lines must be positive")
    return trees(args, source) if args.tree else synthetic(args, source)


if __name__ == "__main__":
    sys.exit(main())
