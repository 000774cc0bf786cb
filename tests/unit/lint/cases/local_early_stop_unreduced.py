"""Early stopping on this rank's own validation loss (not reduced): one rank breaks, the others wait in the barrier."""
# expect: kind local
import torch
import torch.distributed as dist
import torch.nn.functional as F


def fit(model, optimizer, train_step, val_loader, epochs: int):
    best = float("inf")
    for epoch in range(epochs):
        train_step(model, optimizer)
        val_loss = 0.0
        with torch.no_grad():
            for x, y in val_loader:
                val_loss += F.cross_entropy(model(x), y).item()
        if val_loss > best:  # expect: branch a
            break
        best = val_loss
        dist.barrier()  # expect: call a
    return best
