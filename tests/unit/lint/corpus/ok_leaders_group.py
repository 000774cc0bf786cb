"""Node leaders exchange their nodes' statistics on a group of the leaders only, then every rank
gets the total from rank 0 (2 gloo ranks on one node: the leaders are [0]).

shape: a (group members) — `if rank in leaders: dist.all_reduce(..., group=leaders_group)` where
leaders_group = dist.new_group(leaders): the condition lets through exactly the group's members.
truth: correct — every member of leaders_group issues the all_reduce; the world broadcast after
it runs on every rank. Exits 0 after checking the total.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    leaders = list(range(0, world, per_node))
    leaders_group = dist.new_group(leaders)
    node_stats = torch.tensor([float(per_node), 1.0])  # ranks on this node, nodes
    if rank in leaders:
        dist.all_reduce(node_stats, group=leaders_group)
    dist.broadcast(node_stats, src=0)
    assert node_stats.tolist() == [float(world), float(len(leaders))], node_stats
    print(f"rank {rank}: {int(node_stats[0])} ranks on {int(node_stats[1])} nodes")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
