"""Ring exchange with batch_isend_irecv (send right, receive from left) where rank 2 receives from
its right neighbour: rank 0's batch completes and it moves on to the all_reduce; ranks 1 and 2
wait in their batches."""
import datetime

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
    rank, world = dist.get_rank(), dist.get_world_size()
    right = (rank + 1) % world
    left = (rank - 1) % world if rank != 2 else (rank + 1) % world  # bug: rank 2 receives from 0
    send_buf, recv_buf = torch.full((6,), float(rank)), torch.empty(6)
    ops = [dist.P2POp(dist.isend, send_buf, right), dist.P2POp(dist.irecv, recv_buf, left)]
    for req in dist.batch_isend_irecv(ops):  # @batch
        req.wait()
    dist.all_reduce(recv_buf)


if __name__ == "__main__":
    main()
