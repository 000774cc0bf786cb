"""The sorts the statistics share or choose by their data give what sorting stably everywhere gives:
per call site the median bytes (sites.py: one sort of key and size joined, of the sizes alone
where every weight is the same) against statistics.median of each key's list with every value
repeated its weight times, and a weighted Sample's order statistics and mean against the list it
stands for; sizes beyond int64 (Python ints) too."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from collcheck.stats.sample import Sample, fmean, median, percentile
from collcheck.stats.sites import _median_bytes


def _expected_medians(key, nbytes, weight, n_keys) -> list[int]:
    lists = [[] for _ in range(n_keys)]
    for k, b, w in zip(key.tolist(), nbytes.tolist(), weight.tolist()):
        lists[k] += [b] * w
    return [int(statistics.median(v)) for v in lists]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weights", ["equal", "mixed"])
def test_median_bytes_are_statistics_medians(seed, weights):
    rng = np.random.default_rng(seed)
    n, n_keys = 3000, 7
    key = rng.permutation(np.arange(n) % n_keys).astype(np.int64)  # (every key used)
    nbytes = rng.choice([0, 4, 6, 4096, 1 << 20, 3 << 30], n).astype(np.int64)
    weight = np.full(n, 3, dtype=np.int64) if weights == "equal" else rng.integers(1, 5, n).astype(np.int64)
    assert _median_bytes(key, nbytes, weight, n_keys) == _expected_medians(key, nbytes, weight, n_keys)


def test_median_bytes_beyond_int64_and_of_sizes_too_far_apart_to_join():
    """Python-int sizes (object), and int64 sizes whose range times the keys leaves int64: the
    lexsort taken instead."""
    key = np.array([0, 1, 0, 1, 0, 2], dtype=np.int64)
    weight = np.array([1, 2, 1, 1, 1, 4], dtype=np.int64)
    huge = np.array([1 << 70, 5, 3, 1 << 65, 2, 7], dtype=object)
    assert _median_bytes(key, huge, weight, 3) == _expected_medians(key, huge, weight, 3)
    far = np.array([0, (1 << 62) - 1, 5, 3, 1 << 61, 9], dtype=np.int64)
    assert _median_bytes(key, far, weight, 3) == _expected_medians(key, far, weight, 3)


@pytest.mark.parametrize("seed", range(4))
def test_samples_read_as_the_lists_they_stand_for(seed):
    """Equal weights (values sorted alone), mixed weights, floats, negative ints."""
    rng = np.random.default_rng(seed)
    ints = rng.integers(-50, 5000, 501)
    floats = rng.normal(size=300)
    for values, weights in ((ints, None), (ints, np.full(501, 4)), (ints, rng.integers(1, 6, 501)),
                            (floats, np.full(300, 2)), (floats, rng.integers(1, 3, 300))):
        sample = Sample(values, weights)
        listed = [v for v, w in zip(values.tolist(), (weights if weights is not None else np.ones(len(values), int)).tolist())
                  for _ in range(w)]
        assert len(sample) == len(listed)
        assert median(sample) == statistics.median(listed)
        assert [percentile(sample, q) for q in (0, 0.25, 0.5, 0.99, 1)] == [percentile(listed, q)
                                                                            for q in (0, 0.25, 0.5, 0.99, 1)]
        assert fmean(sample) == statistics.fmean(listed)


@pytest.mark.parametrize("seed", range(3))
def test_clock_offsets_are_statistics_medians_per_class(seed):
    """skew.py's per-class medians of completion differences (odd and even counts, negative
    differences, Python ints beyond int64) as statistics.median of each class's list."""
    from collcheck.stats.skew import _medians

    rng = np.random.default_rng(seed)
    n = 5
    at = rng.permutation(np.concatenate([np.arange(n), rng.integers(0, n, 400)])).astype(np.int64)
    diffs = rng.integers(-10_000, 10_000, len(at)).astype(np.int64)
    lists = [[d for a, d in zip(at.tolist(), diffs.tolist()) if a == k] for k in range(n)]
    want = [statistics.median(v) for v in lists]
    assert _medians(at, diffs, n) == want and [type(x) for x in _medians(at, diffs, n)] == [type(x) for x in want]
    huge = np.array([d + (1 << 70) for d in diffs.tolist()], dtype=object)
    assert _medians(at, huge, n) == [statistics.median([d + (1 << 70) for d in v]) for v in lists]
