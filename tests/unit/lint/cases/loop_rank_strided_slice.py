"""Manual sharding by rank (`files[rank::world_size]`): ranks get different numbers of files, and of all-reduces."""
import torch
import torch.distributed as dist


def score_files(files: list, model) -> torch.Tensor:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    mine = files[rank::world_size]
    total = torch.zeros(1, device="cuda")
    for path in mine:  # expect: branch a
        batch = torch.load(path).cuda()
        score = model(batch).sum()
        dist.all_reduce(score)  # expect: call a
        total += score
    return total
