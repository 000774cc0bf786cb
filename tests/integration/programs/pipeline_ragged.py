"""A 2-stage pipeline (torch.distributed.pipelining) over 30 samples in batches of 8, microbatches
of 2 samples: each stage derives the number of microbatches from its own data. Stage 0 reads the
inputs, whose last batch is ragged (6 rows: 3 microbatches); the last stage reads the targets,
which its collate pads to 8 rows for a static shape (4 microbatches). At the last step stage 0
runs a 3-microbatch schedule and stage 1 a 4-microbatch one: stage 1 waits for a 4th activation
that never comes. Each step builds its schedule for its count (so every step repeats the stages'
warm-up vote and metadata exchange). Schedule1F1B (PP_SCHEDULE=gpipe: ScheduleGPipe)."""
import datetime
import math
import os

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

SAMPLES, BATCH, MB_SIZE = 30, 8, 2


def local_batches(stage):
    """This stage's data, batch by batch: the inputs on the first stage, the targets on the last."""
    g = torch.Generator().manual_seed(0)
    xs, ys = torch.randn(SAMPLES, 8, generator=g), torch.randn(SAMPLES, 4, generator=g)
    for start in range(0, SAMPLES, BATCH):
        if stage.is_first:
            yield xs[start:start + BATCH]
        else:
            y = ys[start:start + BATCH]
            yield torch.cat([y, y.new_zeros(BATCH - len(y), 4)])  # pad to a static shape


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8, 16), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(16, 4))]
    stage = PipelineStage(layers[rank], rank, world, torch.device("cpu"))
    cls = ScheduleGPipe if os.environ.get("PP_SCHEDULE") == "gpipe" else Schedule1F1B
    loss_fn = torch.nn.functional.mse_loss
    opt = torch.optim.SGD(stage.submod.parameters(), lr=0.1)
    for batch in local_batches(stage):
        n_mb = math.ceil(len(batch) / MB_SIZE)  # @count
        schedule = cls(stage, n_microbatches=n_mb, loss_fn=loss_fn)  # the count can change per batch
        inputs = (batch,) if stage.is_first else ()
        target = batch if stage.is_last else None
        opt.zero_grad()
        schedule.step(*inputs, target=target)  # @step
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
