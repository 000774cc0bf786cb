"""The uneven-inputs fix by hand: every rank loops up to the all-reduced maximum count, padding when it runs out."""
import torch
import torch.distributed as dist


def gather_features(local_items: list) -> list:
    count = torch.tensor(len(local_items), device="cuda")
    dist.all_reduce(count, op=dist.ReduceOp.MAX)
    out = []
    for i in range(int(count.item())):
        item = local_items[i] if i < len(local_items) else torch.zeros(8, device="cuda")
        gathered = [torch.empty_like(item) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered, item)
        out.extend(gathered)
    return out
