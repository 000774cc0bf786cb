"""A ring exchange with blocking calls in the same order on every rank: send to the next rank, then
receive from it; every rank blocks in its send. The pair ordered by rank (quiet) is below."""
import torch.distributed as dist


def exchange(halo, buf):
    rank, world = dist.get_rank(), dist.get_world_size()
    peer = (rank + 1) % world
    dist.send(halo, dst=peer)  # expect: call a
    dist.recv(buf, src=peer)  # expect: branch a


def exchange_ordered(halo, buf):
    rank = dist.get_rank()
    peer = 1 - rank
    if rank < peer:
        dist.send(halo, dst=peer)
        dist.recv(buf, src=peer)
    else:
        dist.recv(buf, src=peer)
        dist.send(halo, dst=peer)


def exchange_async(halo, buf):
    peer = 1 - dist.get_rank()
    work = dist.isend(halo, dst=peer)
    dist.recv(buf, src=peer)
    work.wait()
