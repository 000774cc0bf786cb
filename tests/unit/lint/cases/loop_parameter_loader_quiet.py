"""A training loop over a loader the caller passed in: nothing says its length differs per rank, so no finding."""
import deepspeed
import torch
from torch.nn.parallel import DistributedDataParallel as DDP


def train_ddp(model, loader, optimizer, local_rank: int) -> None:
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    for batch in loader:
        optimizer.zero_grad()
        loss = model(batch.to(local_rank)).mean()
        loss.backward()
        optimizer.step()


def train_deepspeed(args, model, train_loader) -> None:
    engine, *_ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
    for step, batch in enumerate(train_loader):
        loss = engine(batch["input"].to(engine.device)).mean()
        engine.backward(loss)
        engine.step()
    torch.cuda.synchronize()
