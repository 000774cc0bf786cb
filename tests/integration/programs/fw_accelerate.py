"""An accelerate training loop (DDP on 2 gloo ranks, CPU): a few steps, an evaluation whose
predictions are gathered for the metric, wait_for_everyone() (argv[1] picks the case).

main_only_gather: the evaluation gathers its predictions with gather_for_metrics inside
`if accelerator.is_main_process:` (only the main process computes the metric): rank 0
all-gathers while rank 1 goes on to wait_for_everyone().

uneven: each rank streams its own shard (a per-rank iterable, never prepared: even_batches
cannot pad it), rank 0's 4 batches against rank 1's 3: rank 0's 4th backward all-reduces
gradients while rank 1 has gone on to the evaluation.

ok: every rank gathers, the same number of steps everywhere.

The job's group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang of the bugs.
"""

import datetime
import os
import sys

import torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs

BATCH = 4


def shard_batches(rank: int, steps: int):
    """This rank's own stream of training batches (a per-rank file, a queue...)."""
    g = torch.Generator().manual_seed(rank)
    for _ in range(steps):
        yield torch.randn(BATCH, 8, generator=g), torch.randn(BATCH, 1, generator=g)


def evaluate(accelerator, model, loader, case):
    model.eval()
    errors = []
    with torch.no_grad():
        for x, y in loader:
            error = (model(x) - y).abs()
            if case == "main_only_gather":
                if accelerator.is_main_process:  # only the main process computes the metric
                    errors.append(accelerator.gather_for_metrics(error))  # @main_gather
            else:
                errors.append(accelerator.gather_for_metrics(error))  # @gather
    model.train()
    return torch.cat(errors).mean().item() if errors else None


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(backend="gloo", timeout=timeout)])
    rank = accelerator.process_index
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    val = torch.utils.data.TensorDataset(torch.randn(2 * BATCH * 2, 8), torch.randn(2 * BATCH * 2, 1))
    val_loader = torch.utils.data.DataLoader(val, batch_size=BATCH)
    model, optimizer, val_loader = accelerator.prepare(model, optimizer, val_loader)
    steps = 4 if case == "uneven" and rank == 0 else 3
    for x, y in shard_batches(rank, steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)  # @backward
        optimizer.step()
        optimizer.zero_grad()
    metric = evaluate(accelerator, model, val_loader, case)  # @evaluate
    accelerator.wait_for_everyone()  # @wait
    accelerator.print("mean abs error", metric)
    accelerator.end_training()


if __name__ == "__main__":
    main(sys.argv[1])  # @main
