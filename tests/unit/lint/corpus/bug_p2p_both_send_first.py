"""Plain torch.distributed: a two-rank halo exchange written with blocking calls in the same order
on both ranks: send to the peer, then receive from it (a 64 MiB halo).

shape: point-to-point order — `dist.send(halo, peer)` then `dist.recv(buf, peer)` on every rank:
both ranks block in their send, neither reaches its receive.
truth: buggy — gloo's send waits for the matching receive: both sends time out.
expected lint target: bug_p2p_both_send_first.py:24 (the call, marker @bug); no condition.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    peer = 1 - rank
    halo = torch.full((16 * 1024 * 1024,), float(rank))
    buf = torch.empty_like(halo)
    dist.send(halo, dst=peer)  # @bug
    dist.recv(buf, src=peer)
    print(f"rank {rank}: got the halo of rank {int(buf[0])}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
