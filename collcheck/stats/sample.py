"""Numbers counted with a weight each: what a fold of ranks with equal columns (model.Timings.folds)
contributes to a statistic, its values once and the number of its ranks as their weight, without
a copy per rank. The statistics read a `Sample` as they would read the list it stands for
(`median`, `percentile`, `fmean` take either), with the same results: the same order statistics,
and the mean from the exact sum, as statistics.fmean's fsum gives it."""

from __future__ import annotations

import statistics
from fractions import Fraction

import numpy as np


class Sample:
    """A multiset of numbers: `values`, each `weights` times (a weight of 1 each by default)."""

    def __init__(self, values: np.ndarray, weights: np.ndarray | None = None):
        values = np.asarray(values)
        w = np.ones(len(values), dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
        if values.dtype.kind in "iu" and (not len(w) or (w == w[0]).all()):  # (equal ints: any order)
            self.values = np.sort(values)
        else:
            order = np.argsort(values, kind="stable")
            self.values, w = values[order], w[order]
        self.ends = np.cumsum(w)  # sorted position after each value's copies
        self.weights = w

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def __bool__(self) -> bool:
        return len(self) > 0

    def nth(self, k: int):
        """The k-th smallest (from 0), as the sorted list holds it (a Python number)."""
        v = self.values[int(np.searchsorted(self.ends, k, side="right"))]
        return v.item() if isinstance(v, np.generic) else v

    def total(self):
        """The exact sum, as a Fraction (of the numbers as floats where fsum would read them so)."""
        if self.values.dtype.kind in "iu" or self.values.dtype == object and all(
                isinstance(v, int) for v in self.values.tolist()):
            exact = [(int(float(v)) if abs(v) > 1 << 53 else v) for v in self.values.tolist()]
            return Fraction(sum(v * w for v, w in zip(exact, self.weights.tolist())))
        return sum((Fraction(float(v)) * w for v, w in zip(self.values.tolist(), self.weights.tolist())), Fraction(0))


def median(data):
    """statistics.median of a list or a Sample."""
    if not isinstance(data, Sample):
        return statistics.median(data)
    n = len(data)
    if not n:
        raise statistics.StatisticsError("no median for empty data")
    if n % 2:
        return data.nth(n // 2)
    return (data.nth(n // 2 - 1) + data.nth(n // 2)) / 2


def percentile(data, q: float):
    """The value at q of the way up (sorted(data)[int(q * n)], the last at most); None when empty."""
    n = len(data)
    if not n:
        return None
    k = min(n - 1, int(q * n))
    return data.nth(k) if isinstance(data, Sample) else sorted(data)[k]


def fmean(data) -> float:
    """statistics.fmean of a list or a Sample (fsum's correctly rounded sum, over the count)."""
    if not isinstance(data, Sample):
        return statistics.fmean(data)
    n = len(data)
    if not n:
        raise statistics.StatisticsError("fmean requires at least one data point")
    return float(data.total()) / n


def weighted(parts: list[tuple[np.ndarray, int]]) -> Sample:
    """A Sample of arrays, each with a weight (its fold's ranks)."""
    if not parts:
        return Sample(np.zeros(0, np.int64))
    values = np.concatenate([a for a, _ in parts])
    return Sample(values, np.repeat([w for _, w in parts], [len(a) for a, _ in parts]))


def sorted_by_key(key: np.ndarray, values: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values sorted by key, then value, and the running sum of their weights. Equal pairs may
    come in any order (the value at each running position is the same): one sort of a key and value
    made one int64 where they fit, of the values alone where every weight is the same."""
    if len(values) and values.dtype != object:
        low = int(values.min())
        span = int(values.max()) - low + 1
        if (int(key.max()) + 1) * span < 1 << 62:
            joined = key * span + (values - low)
            if (weight == weight[0]).all():
                joined.sort()
                return joined % span + low, np.arange(1, len(joined) + 1) * weight[0]
            order = np.argsort(joined)
            return values[order], np.cumsum(weight[order])
    order = np.lexsort((values, key))
    return values[order], np.cumsum(weight[order])
