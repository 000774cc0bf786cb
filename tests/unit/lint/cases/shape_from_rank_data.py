"""Collectives of tensors whose shape may differ per rank (rank-shape, warnings): a histogram of this
rank's labels, a buffer sized from this rank's count, all-to-all output splits this rank computed
alone. Quiet: a fixed size filled with per-rank values, splits received from the peers first."""
import torch
import torch.distributed as dist


def exchange(tokens: torch.Tensor) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    labels = torch.randint(0, 5, (rank + 3,))
    counts = torch.bincount(labels)
    dist.all_reduce(counts)  # expect: call a  # expect: branch a
    buffer = torch.zeros(rank + 1)
    dist.broadcast(buffer, src=0)  # expect: call b  # expect: branch b
    filled = torch.full((4,), float(rank))
    dist.all_reduce(filled)  # the same shape everywhere, per-rank values
    send = torch.bincount(labels, minlength=world)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # the counts each peer sends, received
    out = torch.empty(int(recv.sum()))
    dist.all_to_all_single(out, tokens, output_split_sizes=recv.tolist(), input_split_sizes=send.tolist())
    mine = send.tolist()
    dist.all_to_all_single(out, tokens, output_split_sizes=mine,  # expect: call c  # expect: branch c
                           input_split_sizes=send.tolist())
