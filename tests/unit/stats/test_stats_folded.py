"""collcheck stats counts the ranks whose columns are equal once (model.Timings.folds, weighted by
their number): the same tables, JSON and hints as each rank counted alone, and as the events
decoded one by one (a run loaded without the scan's times); and the figures of a small run,
worked out by hand."""

from __future__ import annotations

import io
import json
import random

import pytest
from support import runs
from support.runs import Call

from collcheck.model import load_run
from collcheck.report.stats import render_text, to_dict
from collcheck.stats.summary import compute
from collcheck.synth import Fault, generate_program, write_run, write_clean_run


def _outputs(st) -> tuple[str, str]:
    text = io.StringIO()
    render_text(st, text, top=1000)
    return json.dumps(to_dict(st), sort_keys=False), text.getvalue()


def _all_ways(directory: str) -> list[tuple[str, str]]:
    """The report three ways: folded, each rank alone, from decoded events."""
    run = load_run(directory, times=True)
    folded = compute(run)
    assert len(folded.timings.folds) <= len(run.ranks)
    return [_outputs(folded), _outputs(compute(run, fold=False)), _outputs(compute(load_run(directory)))]


def _stragglers_run(directory: str, world: int = 12, steps: int = 40):
    """Ranks 0-3 all-reduce on a group of their own before each step's collectives (so they come
    last to the world's); every rank all-reduces three tensors in a loop (a fuse hint) and a small
    one (a batch hint), an optimizer step after each step; the last rank was killed in its last."""
    groups = {"0": tuple(range(world)), "a": (0, 1, 2, 3)}
    ranks = {}
    for r in range(world):
        calls = []
        for s in range(steps):
            if r < 4:
                calls += [Call(group="a", size=256, line=30), Call(group="a", size=256, line=31)]
            calls += [Call(size=size, line=20) for size in (1024, 2048, 4096)]
            calls.append(Call(size=4, line=25, step_after=True))
        ranks[r] = calls
    ranks[world - 1] = ranks[world - 1][:-1] + [Call(size=4, line=25, done=False)]
    runs.write(directory, groups, ranks, finished=range(world - 1), clock={5: 700}, checkpoint=True)


def test_ranks_folded_count_as_each_rank_alone(tmp_path):
    """12 ranks of three kinds (those of group a, the others, the killed one): folded, alone and
    decoded, the same report; the report is not empty of what folding weighs (stragglers, a loop,
    steps)."""
    _stragglers_run(str(tmp_path))
    assert [f.ranks for f in compute(load_run(str(tmp_path), times=True)).timings.folds] == [
        [0, 1, 2, 3], [4, 5, 6, 7, 8, 9, 10], [11]]
    ways = _all_ways(str(tmp_path))
    assert ways[0] == ways[1] == ways[2]
    doc = json.loads(ways[0][0])
    assert doc["slots"] and doc["steps"]["count"] == 39
    assert {h["kind"] for h in doc["hints"]} >= {"fuse", "overlap"}
    assert sum(s["last_in"] for s in doc["stragglers"]) == len(doc["slots"])


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_folded_and_alone_agree(tmp_path, seed):
    """Random programs (subgroups, P2P, coalesced calls), two hosts, some with a fault, on 8-10
    ranks (loaded by kinds): the three ways agree."""
    rng = random.Random(seed)
    world = 8 + seed % 3
    prog = generate_program(rng, world, 120, groups=3)
    faults = [Fault("extra", seed % world, 40, "0")] if seed % 2 else []
    write_run(str(tmp_path), prog, faults=faults, hosts={r: f"h{r % 2}" for r in range(world)})
    assert max(len(f.ranks) for f in compute(load_run(str(tmp_path), times=True)).timings.folds) > 1
    ways = _all_ways(str(tmp_path))
    assert ways[0] == ways[1] == ways[2]


def test_a_clean_run_of_many_ranks_folds_into_its_kinds(tmp_path):
    """64 ranks, strided subgroups: a fold per kind of rank, the report as each rank alone."""
    write_clean_run(str(tmp_path), 64, 400, groups=[list(range(k, 64, 4)) for k in range(4)])
    run = load_run(str(tmp_path), times=True)
    folded = compute(run)
    assert len(folded.timings.folds) == 4
    assert _outputs(folded) == _outputs(compute(run, fold=False))


def test_the_figures_of_a_small_run(tmp_path):
    """Two ranks, three all-reduces of 1024 floats on the world; rank 1 all-reduces alone on group
    b before each (its world calls at 200, 400, 600 µs, rank 0's at 100, 200, 300; each completes
    40 µs after its issue). Rank 1's clock: the median of 100, 200, 300 µs ahead. Its arrivals on
    rank 0's clock: 0, 200, 400: the first slot is start-up, at the second both arrive at 200, at
    the third rank 0 waits 100 µs, none of it rank 1's longer work (60 µs before each on both)."""
    world = [Call(size=1024, line=20) for _ in range(3)]
    alone = [Call(group="b", size=16, line=30)]
    runs.write(str(tmp_path), {"0": (0, 1), "b": (1,)}, {0: world, 1: [c for w in world for c in (*alone, w)]})
    st = compute(load_run(str(tmp_path), times=True))
    doc = to_dict(st)
    base = 1_700_000_000_000_000  # µs: the logs' wall clock at their origin
    site = {"file": runs.FILE, "line": 20, "function": "train_step"}
    top = doc["sites"][0]
    assert (top["site"], top["ranks"], top["calls"], top["bytes_per_call"]) == (site, [0, 1], 3, 4096)
    assert (top["total_s"], top["median_us"], top["p99_us"]) == (0.00012, 40, 40)
    assert top["algbw_mbs"] == pytest.approx(102.4) and top["busbw_mbs"] == pytest.approx(102.4)
    assert doc["groups"]["0"]["calls"] == 3 and doc["groups"]["0"]["bytes"] == 3 * 4096
    assert doc["clock_offsets_us"] == {"0": 0, "1": 200}
    assert doc["slots"] == [{"group": "0", "position": 2, "last": 1, "waited_s": 0.0001}]
    assert st.skew.slots[0][5] == base + 400
    assert [(s["rank"], s["last_in"], s["collectives"], s["wait_caused_s"]) for s in doc["stragglers"]] == [
        (0, 0, 1, 0.0), (1, 1, 1, 0.0)]


@pytest.mark.parametrize("seed", range(3))
def test_vectorised_unions_of_intervals_are_those_of_the_interval_by_interval_walks(seed):
    """The groups' busy edges (concurrency.py) and each step's time inside collectives (steps.py),
    numpy, against the walks over one interval at a time they keep for Python-int times: random
    overlapping, touching and nested intervals of a few groups."""
    import numpy as np

    from collcheck.stats.concurrency import _busy_edges, _busy_edges_exact
    from collcheck.stats.steps import _busy_loop, _measure

    rng = np.random.default_rng(seed)
    n = 3000
    begin = np.sort(rng.integers(0, 40_000, n))
    end = begin + rng.integers(0, 60, n) * rng.integers(0, 2, n) + rng.integers(1, 4, n)
    group = rng.integers(0, 5, n)
    times, active = _busy_edges(group, begin, end)
    want_times, want_active = _busy_edges_exact(group, begin, end)
    # (the count after the last edge at or before each instant: edges at one instant in any order)
    probe = np.arange(-1, 40_100)
    at = np.searchsorted(times, probe, side="right") - 1
    want_at = np.searchsorted(np.array(want_times), probe, side="right") - 1
    assert (np.where(at >= 0, active[np.maximum(at, 0)], 0)
            == np.where(want_at >= 0, np.array(want_active)[np.maximum(want_at, 0)], 0)).all()
    assert sorted(times.tolist()) == sorted(want_times)
    bounds = sorted(set(rng.integers(-100, 41_000, 40).tolist()))
    walls, comm = _measure(begin, end, bounds)
    assert comm == _busy_loop(begin.tolist(), end.tolist(), bounds) and len(walls) == len(bounds) - 1


def test_steps_with_no_completed_collective_spend_no_time_inside_them():
    """A log damaged before its first completion: its steps have wall times and no busy time (a
    damaged log is read as far as it is whole; its statistics never end in an internal error)."""
    import numpy as np

    from collcheck.stats.steps import _measure

    none = np.array([], dtype=np.int64)
    assert _measure(none, none, [0, 10_000, 30_000]) == ([0.01, 0.02], [0.0, 0.0])
