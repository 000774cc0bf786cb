"""A correct 2-stage pipeline (torch.distributed.pipelining): stage 0 holds the first Linear layer,
stage 1 the second and the loss. Each step splits a batch of 8 into 4 microbatches and runs
forward and backward with Schedule1F1B (PP_SCHEDULE=gpipe: ScheduleGPipe); activations go
0 -> 1 and gradients 1 -> 0 by P2P, and the first step exchanges the stages' metadata."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

BATCH, MICROBATCHES, STEPS = 8, 4, 3


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    layers = [torch.nn.Linear(8, 16), torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(16, 4))]
    stage = PipelineStage(layers[rank], rank, world, torch.device("cpu"))
    cls = ScheduleGPipe if os.environ.get("PP_SCHEDULE") == "gpipe" else Schedule1F1B
    schedule = cls(stage, n_microbatches=MICROBATCHES, loss_fn=torch.nn.functional.mse_loss)
    opt = torch.optim.SGD(stage.submod.parameters(), lr=0.1)
    for step in range(STEPS):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(BATCH, 8, generator=g), torch.randn(BATCH, 4, generator=g)
        inputs = (x,) if stage.is_first else ()  # the first stage takes the batch, the last the targets
        target = y if stage.is_last else None
        opt.zero_grad()
        schedule.step(*inputs, target=target)  # @step
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
