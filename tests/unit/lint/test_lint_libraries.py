"""Installed packages read, not listed (collcheck/lint/libraries.py): a package built here, in no
framework table, whose function reaches `dist.all_gather` three calls deep; its summary is cached
per package version, reused by the next lint and made again when the version changes."""

from __future__ import annotations

import json

import pytest
from support.cli import run_cli

from collcheck.lint import lint_paths

SYNC = '''import torch
import torch.distributed as dist


def gather_all(x):
    return _gather(x)


def _gather(x):
    out = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(out, x)
    return out
'''
METRIC = '''from . import sync


class Metric:
    def update(self, x):
        self.x = x

    def compute(self):
        return sync.gather_all(self.x)

    def reset(self):
        self.x = None


def compute_all(x):
    return sync.gather_all(x)
'''
PROGRAM = '''import torch.distributed as dist
from mymetrics import Metric, compute_all


def evaluate(x):
    m = Metric()
    m.update(x)
    if dist.get_rank() == 0:
        compute_all(x)
        m.compute()
        m.reset()
'''


def _install(site, version: str, sync: str = SYNC) -> None:
    pkg = site / "mymetrics"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("from .metric import Metric, compute_all\n")
    (pkg / "metric.py").write_text(METRIC)
    (pkg / "sync.py").write_text(sync)
    for old in site.glob("mymetrics-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    info = site / f"mymetrics-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: mymetrics\nVersion: {version}\n"
                                   "Requires-Dist: torch>=2.0\n")
    (info / "top_level.txt").write_text("mymetrics\n")


@pytest.fixture
def setup(tmp_path):
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    _install(site, "1.0")
    program = tmp_path / "train.py"
    program.write_text(PROGRAM)
    return site, program, tmp_path / "cache"


def _lint(setup, **kw):
    site, program, cache = setup
    return lint_paths([str(program)], search_path=[str(site)], cache_dir=str(cache), **kw)


def test_a_packages_function_three_calls_deep_is_found_under_a_rank_branch(setup):
    site, program, _ = setup
    result = _lint(setup)
    got = sorted((f.line, f.api, f.severity) for f in result.findings)
    assert got == [(9, "dist.all_gather()", "error"), (10, "dist.all_gather()", "error")], result.findings
    first = min(result.findings, key=lambda f: f.line)
    # the chain from the call down into the package: metric.py -> sync.py's gather_all -> _gather
    assert [(p.rpartition("site-packages/")[2], line) for p, line, _ in first.chain] == [
        (str(program), 9), ("mymetrics/metric.py", 16), ("mymetrics/sync.py", 6), ("mymetrics/sync.py", 11)]
    assert result.libraries == [{"package": "mymetrics", "version": "1.0", "from": "source", "modules": 3}]
    # not read: no finding (no table knows the package)
    assert _lint(setup, libraries=False).findings == []


def test_the_summary_is_cached_per_version(setup):
    site, _, cache = setup
    assert len(_lint(setup).findings) == 2
    [summary] = cache.glob("lint/mymetrics-1.0.json")
    assert "mymetrics.sync._gather" in json.loads(summary.read_text())["functions"]
    # the package's source changes but not its version: the summary is reused, the source not read
    _install(site, "1.0", sync=SYNC.replace("dist.all_gather(out, x)", "out = [x]"))
    again = _lint(setup)
    assert len(again.findings) == 2 and again.libraries[0]["from"] == "cache"
    # a new version: read again (and it no longer gathers)
    _install(site, "1.1", sync=SYNC.replace("dist.all_gather(out, x)", "out = [x]"))
    new = _lint(setup)
    assert new.findings == [] and new.libraries == [
        {"package": "mymetrics", "version": "1.1", "from": "source", "modules": 3}]
    assert sorted(p.name for p in cache.glob("lint/*.json")) == ["mymetrics-1.0.json", "mymetrics-1.1.json"]


def test_a_package_that_does_not_depend_on_torch_is_not_read(setup):
    """Its metadata lists requirements and torch is not among them: it cannot issue collectives of its
    own (sympy, tqdm), so its source is not read (a package without metadata is)."""
    site, _, _ = setup
    [info] = site.glob("mymetrics-*.dist-info")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mymetrics\nVersion: 1.0\nRequires-Dist: mpmath\n")
    result = _lint(setup)
    assert result.findings == [] and result.libraries == []
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mymetrics\nVersion: 1.0\n")  # none said: read
    assert len(_lint(setup).findings) == 2


def test_a_damaged_cache_is_made_again(setup):
    _, _, cache = setup
    (cache / "lint").mkdir(parents=True)
    (cache / "lint" / "mymetrics-1.0.json").write_text('{"summary": 1, "version": "1.0", "functions": {"a": 1}}')
    result = _lint(setup)
    assert len(result.findings) == 2 and result.libraries[0]["from"] == "source"


def test_the_cli_reads_installed_packages_and_says_which(setup, monkeypatch):
    site, program, cache = setup
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("COLLCHECK_CACHE", str(cache))
    res = run_cli("lint", program, "--format", "json")
    report = json.loads(res.out)
    assert res.code == 1 and report["errors"] == 2, res.out
    assert report["libraries"] == [{"package": "mymetrics", "version": "1.0", "from": "source", "modules": 3}]
    assert "libraries read: mymetrics 1.0 (3 modules, from source)" in run_cli("lint", program).out.replace(
        "from cache", "from source")
    assert run_cli("lint", program, "--no-libraries").code == 0
