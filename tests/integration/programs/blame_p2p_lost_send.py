"""Point-to-point on 2 gloo ranks: rank 1 (a worker) summarises its 4 data chunks (mean, std,
min, max) and sends each summary to rank 0 (the collector), which receives 4 from rank 1.

bug: the worker drops a summary that is not finite (`if not torch.isfinite(summary).all():
continue`) instead of sending it for the collector to skip. Rank 1's chunk 2 holds a NaN: it
sends 3 summaries (chunks 0, 1, 3), all of the same shape, so rank 0's receives 0-2 pair with
them and its 4th receive (message 3 of channel 1->0) is never matched: rank 1 should have sent
it. Rank 1 then leaves (destroy_process_group), and rank 0's receive fails (the peer is gone)
or times out.

ok: the worker sends every summary; the collector skips the non-finite one.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

CHUNKS = 4


def chunks(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    data = [torch.randn(16, generator=g) for _ in range(CHUNKS)]
    data[2][5] = float("nan")  # a corrupt record in chunk 2
    return data


def worker(case: str) -> None:
    for chunk in chunks(1):
        summary = torch.stack([chunk.mean(), chunk.std(), chunk.min(), chunk.max()])
        if case != "ok" and not torch.isfinite(summary).all():  # @why
            continue  # a bad chunk: nothing worth sending
        dist.send(summary, dst=0)  # @send


def collector() -> None:
    kept = []
    for i in range(CHUNKS):
        summary = torch.empty(4)
        dist.recv(summary, src=1)  # @recv
        if torch.isfinite(summary).all():
            kept.append(summary)
    print(f"collector: {len(kept)} of {CHUNKS} summaries kept")


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    dist.init_process_group("gloo", timeout=timeout)
    if dist.get_rank() == 0:
        collector()
    else:
        worker(case)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bug")
