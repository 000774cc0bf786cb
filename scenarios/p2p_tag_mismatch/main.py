"""Bug: a 2-stage pipeline tags its messages with counters that the two stages keep differently.

Stage 0 tags each activation with its micro-batch index. Stage 1 derives the tag it waits for
from a message counter that it also bumps when it sends a gradient back, so from the second
micro-batch on it waits for tag 2 while stage 0 sent tag 1. gloo pairs a recv only with a send
of the same tag: both stages wait in their isend/irecv until the timeout (NCCL ignores tags and
would pair them in order). The fix: one tag per kind of message (activation, gradient).
"""
import datetime
import os
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    stage = torch.nn.Linear(8, 8)
    messages = 0  # stage 1's counter of every message it handled
    for micro_batch in range(3):
        if rank == 0:
            act = stage(torch.randn(4, 8)).detach()
            dist.isend(act, dst=1, tag=micro_batch).wait()  # collcheck: culprit
            grad = torch.empty(4, 8)
            dist.irecv(grad, src=1, tag=micro_batch).wait()
        else:
            act = torch.empty(4, 8)
            request = dist.irecv(act, src=0, tag=messages)  # collcheck: culprit
            request.wait()
            messages += 1
            grad = stage(act).detach()
            dist.isend(grad, dst=0, tag=micro_batch).wait()
            messages += 1  # bug: the gradient is counted too, so the next recv waits for tag 2
    print(f"rank {rank}: pipeline done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
