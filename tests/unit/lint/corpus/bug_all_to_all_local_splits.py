"""Plain torch.distributed: a mixture-of-experts token exchange (one expert per rank) with
all_to_all_single, whose output split sizes are taken from this rank's own routing instead of
being exchanged first (each rank assumes it receives what it sends).

shape: a per-rank argument (all_to_all split sizes from local data) — `output_split_sizes =
send_counts.tolist()`; the correct code exchanges the counts with an all_to_all first.
truth: buggy — the ranks disagree on how much each sends the other: gloo fails, or the tokens
land on the wrong expert and the program detects it and exits 3.
expected lint target: bug_all_to_all_local_splits.py:31 (the call, marker @bug); no condition: the
per-rank sizes come from line 29 (marker @origin).
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    expert_of_token = torch.tensor([0, 1, 1, 1]) if rank == 0 else torch.tensor([0, 0, 1, 1, 1])
    order = torch.argsort(expert_of_token, stable=True)
    tokens = expert_of_token[order].float()  # each token carries the expert it is meant for
    send_counts = torch.bincount(expert_of_token, minlength=world)
    recv_counts = send_counts.tolist()  # @origin
    received = torch.empty(sum(recv_counts))
    dist.all_to_all_single(received, tokens, output_split_sizes=recv_counts,  # @bug
                           input_split_sizes=send_counts.tolist())
    if not torch.all(received == rank):
        print(f"rank {rank}: expert {rank} received tokens for {received.tolist()}", file=sys.stderr)
        sys.exit(3)
    print(f"rank {rank}: {received.numel()} tokens")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
