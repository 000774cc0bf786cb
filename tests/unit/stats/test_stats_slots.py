"""The slots every member completed (stats/slots.py) gathered with slices where a class's events
are one range and its entries one group's: the same entries as gathered with index arrays
throughout (the computation before, kept here as the reference), on runs with several kinds of
rank, subgroups, P2P, faults, ranks each alone, and times beyond int64's exact range."""

from __future__ import annotations

import random

import numpy as np
import pytest
from support import runs
from support.runs import Call

from collcheck.model import Sequences, load_run
from collcheck.model.timing import Timings, column
from collcheck.stats import slots as slots_module
from collcheck.synth import Fault, generate_program, write_clean_run, write_run


def _gather_before(timings, first, classes, blocks, entries, shape):
    """stats/slots.py's _gather before the slices: every column gathered and placed by index arrays."""
    groups, starts, counts, widths = shape
    wide = any(t.issue.dtype == object or t.done.dtype == object for t in timings.values())
    cls = np.zeros(entries, dtype=np.int64)
    values = {k: np.zeros(entries, dtype=object if wide and k in ("issue", "done", "work") else np.int64)
              for k in ("issue", "done", "site", "work")}
    ok, worked, startup = (np.zeros(entries, dtype=bool) for _ in range(3))
    for c, parts in blocks.items():
        if not parts:
            continue
        r = classes[c][0]
        t = timings[r]
        lens = [len(ix) for ix, _, _ in parts]
        ix = column(slots_module._joined(ix for ix, _, _ in parts))
        step = np.repeat([m for _, _, m in parts], lens)
        at = np.repeat([e for _, e, _ in parts], lens) + step * (np.arange(len(ix)) - np.repeat(np.cumsum(lens) - lens, lens))
        prev = np.maximum(ix - 1, 0)
        cls[at] = c
        values["issue"][at], values["done"][at], values["site"][at] = t.issue[ix], t.done[ix], t.site[ix]
        values["work"][at] = np.maximum(t.issue[ix] - t.done[prev], 0)
        worked[at] = (ix > 0) & t.has_done[prev]
        ok[at] = t.ok[ix] & ~timings.p2p[t.sig[ix]]
        startup[at] = ix == first.get(r)
    slot_start = np.cumsum([0] + [n * m for n, m in zip(counts, widths)])[:-1]
    group = np.repeat(np.arange(len(groups)), counts)
    within = np.arange(len(group)) - np.repeat(np.cumsum(counts) - counts, counts)
    width = np.repeat(widths, counts)
    first_entry = np.repeat(slot_start, counts) + within * width
    if not len(group):
        return None
    complete = np.logical_and.reduceat(ok, first_entry)
    keep = np.repeat(complete, width)
    kept_width = width[complete]
    lowest = np.array([rs[0] for rs in classes], dtype=np.int64)
    weight = np.array([len(rs) for rs in classes], dtype=np.int64)
    kept = cls[keep]
    return {"group": [groups[g] for g in group[complete].tolist()],
            "position": (within + np.repeat(starts, counts))[complete].tolist(),
            "startup": np.logical_or.reduceat(startup, first_entry)[complete], "start": np.cumsum(kept_width) - kept_width,
            "cls": kept, "rank": lowest[kept], "weight": weight[kept], "issue": values["issue"][keep],
            "done": values["done"][keep], "site": values["site"][keep], "work": values["work"][keep],
            "worked": worked[keep]}


def _both(directory: str, fold: bool = True) -> tuple:
    """completed_slots of the run, and the reference's entries from the same classes and events."""
    run = load_run(directory, times=True)
    timings = Timings(run, fold)
    seen = []
    gather = slots_module._gather

    def keep_arguments(*args):
        seen.append(args)
        return gather(*args)

    slots_module._gather = keep_arguments
    try:
        found = slots_module.completed_slots(run, Sequences(run), timings)
    finally:
        slots_module._gather = gather
    return found, _gather_before(*seen[0])


def _assert_same(found, want) -> None:
    assert want is not None and len(found.start) > 0
    assert [found.names[g] for g in found.group.tolist()] == want["group"]
    assert found.position.tolist() == want["position"]
    for name in ("startup", "start", "cls", "rank", "weight", "issue", "done", "site", "work", "worked"):
        got, expected = getattr(found, name), want[name]
        assert got.dtype == expected.dtype and got.tolist() == expected.tolist(), name
    assert found.entry_slot().tolist() == np.repeat(np.arange(len(want["start"])), np.diff(
        np.append(want["start"], len(want["rank"])))).tolist()


def _kinds_run(directory: str, clock: dict | None = None) -> None:
    """12 ranks: 0-3 also all-reduce on a group of their own, the last killed in its last call."""
    groups = {"0": tuple(range(12)), "a": (0, 1, 2, 3)}
    ranks = {}
    for r in range(12):
        calls = []
        for _ in range(20):
            calls += [Call(group="a", size=256, line=30)] if r < 4 else []
            calls += [Call(size=1024, line=20), Call(size=4, line=25, step_after=True)]
        ranks[r] = calls
    ranks[11] = ranks[11][:-1] + [Call(size=4, line=25, done=False)]
    runs.write(directory, groups, ranks, finished=range(11), clock=clock)


@pytest.mark.parametrize("fold", [True, False])
def test_slots_of_ranks_of_several_kinds(tmp_path, fold):
    _kinds_run(str(tmp_path))
    _assert_same(*_both(str(tmp_path), fold))


def test_slots_with_times_beyond_int64s_exact_range(tmp_path):
    """Rank 5's clock 3e15 µs ahead (beyond model.timing.EXACT): its times are Python ints (object columns)."""
    _kinds_run(str(tmp_path), clock={5: 3 * 10**15})
    found, want = _both(str(tmp_path))
    assert found.issue.dtype == object
    _assert_same(found, want)


def test_slots_of_a_clean_run_with_strided_subgroups(tmp_path):
    write_clean_run(str(tmp_path), 16, 300, groups=[list(range(k, 16, 4)) for k in range(4)])
    _assert_same(*_both(str(tmp_path)))


@pytest.mark.parametrize("seed", range(4))
def test_slots_of_random_programs(tmp_path, seed):
    """Subgroups, P2P, coalesced calls, a fault in some."""
    rng = random.Random(seed)
    world = 6 + seed % 3
    prog = generate_program(rng, world, 100, groups=3)
    faults = [Fault("extra", seed % world, 30, "0")] if seed % 2 else []
    write_run(str(tmp_path), prog, faults=faults)
    _assert_same(*_both(str(tmp_path), fold=seed % 2 == 0))
