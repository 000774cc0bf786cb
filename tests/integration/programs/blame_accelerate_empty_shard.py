"""An accelerate training loop (DDP on 2 gloo ranks, CPU): 2 epochs of 2 steps, each followed by
an evaluation over this process's validation files (`files[rank::world]`: a file's batches, a
sum of absolute errors and a count, reduced across processes).

bug: evaluate() returns early on a process without validation files (`if not shard: return
None`), before the reduction every process must join. There is one validation file, so rank 1's
shard is empty: after epoch 0 rank 1 takes the early return, skipping the reduction, and goes on
to epoch 1's first backward, while rank 0 issues accelerator.reduce's all_reduce (2 floats).
World group: DDP's set-up (slots 0-2), epoch 0's gradient all-reduces and step 1's
bucket-rebuild broadcasts (3-6); at slot 7 rank 1 is missing the reduction (its gradient
all-reduce of 9 floats meets rank 0's 2: gloo aborts or the group times out).

ok: a process without files reduces zeros (its sum and count are 0).

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs

VALIDATION_FILES = ["val-000.pt"]  # (stands for the files on disk: each a list of batches)


def read(name: str, seed: int = 100):
    g = torch.Generator().manual_seed(seed + len(name))
    return [(torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)) for _ in range(2)]


def evaluate(accelerator, model, shard: list, case: str):
    """The mean absolute error over every process's files."""
    if case != "ok" and not shard:  # @cond
        return None  # nothing to evaluate on this process
    sums = torch.zeros(2)
    with torch.no_grad():
        for batch in (b for name in shard for b in read(name)):
            error = (model(batch[0]) - batch[1]).abs()
            sums += torch.stack([error.sum(), torch.tensor(float(error.numel()))])
    sums = accelerator.reduce(sums, reduction="sum")  # @reduce
    return (sums[0] / sums[1]).item()


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(backend="gloo", timeout=timeout)])
    rank, world = accelerator.process_index, accelerator.num_processes
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model, optimizer = accelerator.prepare(model, optimizer)
    g = torch.Generator().manual_seed(rank)
    for epoch in range(2):
        for _ in range(2):
            x, y = torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)
            accelerator.backward(torch.nn.functional.mse_loss(model(x), y))  # @backward
            optimizer.step()
            optimizer.zero_grad()
        error = evaluate(accelerator, model, VALIDATION_FILES[rank::world], case)  # @evaluate
        accelerator.print(f"epoch {epoch}: mean abs error {error}")
    accelerator.end_training()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bug")
