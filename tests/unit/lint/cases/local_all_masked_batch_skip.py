"""Fine-tuning that skips a batch whose labels are all masked (-100) on this rank: it skips DDP's backward too."""
# expect: kind local
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def finetune(model, dataset, collate, optimizer, local_rank: int) -> None:
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    loader = DataLoader(dataset, batch_size=8, sampler=DistributedSampler(dataset), collate_fn=collate)
    for batch in loader:
        batch = {k: v.to(local_rank) for k, v in batch.items()}
        if (batch["labels"] != -100).sum() == 0:  # expect: branch a
            continue
        loss = model(**batch).loss
        loss.backward()  # expect: call a
        optimizer.step()
        optimizer.zero_grad()
