"""A loop whose trip count depends on the rank (`n = 10 - rank`): ranks run different numbers of all_gathers."""
import torch
import torch.distributed as dist

B = 4


def gather_chunks(features: torch.Tensor) -> list:
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    n = 10 - rank
    gathered = []
    for start in range(0, n, B):  # expect: branch a
        chunk = features[start:start + B]
        out = [torch.empty_like(chunk) for _ in range(world_size)]
        dist.all_gather(out, chunk)  # expect: call a
        gathered.extend(out)
    return gathered
