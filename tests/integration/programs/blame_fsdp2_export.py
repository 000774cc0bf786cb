"""FSDP2 (fully_shard on each Linear and the root) on 2 gloo ranks, CPU: a user's Trainer class
trains 2 epochs of 2 steps and exports the full (unsharded) state dict at each epoch's end.

bug: Trainer.end_epoch exports only `if self.rank == 0:` (only rank 0 writes the file), but
get_model_state_dict(full_state_dict=True) all-gathers every parameter's shards (a DTensor
full_tensor() each). Each step issues 6 collectives on the world group (2 forward all-gathers, a
backward and a prefetch all-gather, 2 reduce-scatters): epoch 0 is slots 0-11. Rank 0 takes the
branch (Trainer.end_epoch, its export() a frame further in) and issues the export's first
all-gather (the first weight, 8x8 per rank) at slot 12, an extra collective, while rank 1
starts epoch 1: its forward's all-gather of the first layer (72 floats) at slot 12.

ok: every rank exports (the all-gathers pair); rank 0 keeps the bytes.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import io
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


class Trainer:
    def __init__(self, rank: int, mesh):
        self.rank = rank
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        for layer in (self.model[0], self.model[2]):
            fully_shard(layer, mesh=mesh)
        fully_shard(self.model, mesh=mesh)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.exported = b""

    def train_step(self, x: torch.Tensor) -> None:
        loss = self.model(x).square().mean()  # @forward
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()

    def export(self) -> dict:
        options = StateDictOptions(full_state_dict=True)
        return get_model_state_dict(self.model, options=options)  # @export

    def end_epoch(self, case: str) -> None:
        if case == "ok":
            state = self.export()
            if self.rank == 0:
                self.exported = self.save(state)
        elif self.rank == 0:  # @cond
            self.exported = self.save(self.export())  # @export_call

    @staticmethod
    def save(state: dict) -> bytes:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        return buffer.getvalue()


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    trainer = Trainer(rank, init_device_mesh("cpu", (dist.get_world_size(),)))
    for epoch in range(2):
        for step in range(2):
            trainer.train_step(torch.randn(4, 8, generator=torch.Generator().manual_seed(100 * rank + step)))
        trainer.end_epoch(case)
    print(f"rank {rank}: exported {len(trainer.exported)} bytes")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bug")
