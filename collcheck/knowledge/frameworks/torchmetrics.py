"""torchmetrics 1.9.0: a Metric's state sync (what `compute()` does on every rank).

A Metric object logged with Lightning's `self.log(name, metric)` syncs itself through these
frames at epoch end, whatever `sync_dist` says. Each entry's `at` cites torchmetrics 1.9.0.
"""

from __future__ import annotations

from .entry import CALL, HELPER, Entry

DISTRIBUTIONS = ("torchmetrics",)
VERSION = "1.9.0"
ALIASES: dict = {}

_FIX = ("call `metric.compute()` on every rank (or log the Metric on every rank): each rank's state is gathered "
        "from all ranks, also on a rank that never called `update()`")

ENTRIES = {
    # metric.py:614 `self._sync_dist(dist_sync_fn, process_group=process_group)` (gather_all_tensors per state)
    ("torchmetrics/metric.py", "Metric.sync"): Entry(
        "torchmetrics metric state sync (`compute()` gathers every rank's state)", _FIX, "metric.compute()", CALL, 614),
    # utilities/distributed.py:121 `torch.distributed.barrier(group=group)`, :130 the sizes' all_gather, :147 the states'
    ("torchmetrics/utilities/distributed.py", "gather_all_tensors"): Entry(
        "torchmetrics `gather_all_tensors` (barrier, sizes, then the states)", _FIX, None, HELPER, (121, 130, 147)),
}

NAMES: dict = {}
