"""Two bugs only the user's call chain explains (argv[1] picks one).

extra_forward: a normalisation layer all-gathers its batch statistics in training mode (as
SyncBatchNorm does on GPUs). At step 2 rank 0 alone runs a visualisation forward pass with the
model still in train(): its layers all-gather from the same line, with the same shapes, as
rank 1's training pass; the collectives pair silently until the gradient all-reduces meet
all-gathers.

helper_barrier: a barrier inside a helper (`sync_checkpoint`) that rank 0 alone reaches from
`evaluate()`; the other rank goes on to the next step's all-reduce.

clean: the training steps alone.
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist


class StatsNorm(torch.nn.Module):
    """Normalises with statistics gathered from every rank (training mode only)."""

    def forward(self, x):
        if not self.training:
            return x
        stats = torch.stack([x.detach().mean(0), (x.detach() ** 2).mean(0)])
        gathered = [torch.empty_like(stats) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, stats)  # @stats_gather
        mean, sq = torch.stack(gathered).mean(0)
        return (x - mean) / (sq - mean**2 + 1e-5).sqrt()


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), StatsNorm(), torch.nn.Linear(8, 4), StatsNorm())


def train_step(model, opt, batch):
    loss = model(batch).square().mean()  # @train_forward
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    opt.step()
    opt.zero_grad()


def visualise(model, batch):
    return model(batch[:4])  # @extra_forward


def sync_checkpoint():
    dist.barrier()  # @helper_barrier


def evaluate(model, rank):
    if rank == 0:
        sync_checkpoint()  # @evaluate_calls


def main():
    mode = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6))
    rank = dist.get_rank()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(4):
        batch = torch.randn(4, 8, generator=torch.Generator().manual_seed(step * 10 + rank))
        if mode == "extra_forward" and rank == 0 and step == 2:
            visualise(model, batch)  # @visualise_call
        if mode == "helper_barrier" and step == 2:
            evaluate(model, rank)
        train_step(model, opt, batch)  # @train_call
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()  # @main
