"""Bug: expert-parallel token dispatch where one rank sizes its receive buffer from a static capacity.

Each rank routes its 6 tokens (rows of 4 features) to the experts on ranks 0-2 and sends them with
all_to_all_single, input splits = its own routing counts. The receive (output) splits must come
from what the *other* ranks route to this one, which is data-dependent: the usual fix exchanges
the counts first. Here rank 2 was configured with a fixed capacity (2 tokens from every rank)
instead. Step 0 routes evenly, so it works; at step 1 routing is skewed, rank 0 sends 3 tokens to
rank 2, which expects 2.
"""
import datetime
import os
import torch
import torch.distributed as dist

TOKENS, FEATURES = 6, 4
ROUTING = [  # step -> rank -> tokens sent to ranks 0, 1, 2
    [[2, 2, 2], [2, 2, 2], [2, 2, 2]],
    [[1, 2, 3], [3, 1, 2], [2, 3, 1]],
]


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    static_capacity = 2 if rank == 2 else None  # the rank-dependent config
    for step, routing in enumerate(ROUTING):
        send = routing[rank]
        tokens = torch.randn(TOKENS, FEATURES)
        if static_capacity is None:
            recv = [routing[src][rank] for src in range(world)]  # stands for the counts exchange
        else:
            recv = [static_capacity] * world
        out = torch.empty(sum(recv), FEATURES)
        dist.all_to_all_single(out, tokens, recv, send)  # collcheck: culprit
        print(f"rank {rank} step {step}: received {out.shape[0]} tokens", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
