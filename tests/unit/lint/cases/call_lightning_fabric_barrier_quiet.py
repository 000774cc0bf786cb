"""The twin of call_lightning_fabric_barrier: rank 0 writes the cache, every rank meets at the barrier."""
import torch
from lightning.fabric import Fabric


def main():
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
    fabric.launch()
    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = fabric.setup(model, optimizer)
    if fabric.global_rank == 0:
        fabric.print("writing the dataset cache")
    fabric.barrier()
