"""Lightning Fabric's `fabric.barrier()` on global rank 0 alone."""
import torch
from lightning.fabric import Fabric


def main():
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
    fabric.launch()
    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = fabric.setup(model, optimizer)
    if fabric.global_rank == 0:  # expect: branch a
        fabric.print("writing the dataset cache")
        fabric.barrier()  # expect: call a
