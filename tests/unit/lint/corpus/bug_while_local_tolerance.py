"""Plain torch.distributed: each rank refines its own estimate until its own error is below a
tolerance, reporting its progress with an all_reduce each iteration; the ranks start from
different estimates, so they need different numbers of iterations (rank 1 more).

shape: a while loop on this rank's own data around a collective — `while abs(estimate - target)
> tol: ...; dist.all_reduce(progress)`.
truth: buggy — rank 1 issues more all_reduces than rank 0, which has gone on to the all_gather of
the iteration counts: the ranks detect the mismatch (or gloo fails) and exit non-zero.
expected lint target: bug_while_local_tolerance.py:31 (the call, marker @bug) in the loop at line 27
(marker @cond).
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
    target, estimate, iterations = 1.0, 2.0 + 100.0 * rank, 0
    progress = torch.zeros(1)
    while abs(estimate - target) > 1e-3:  # @cond
        estimate = (estimate + target) / 2
        iterations += 1
        progress.fill_(abs(estimate - target))
        dist.all_reduce(progress)  # @bug
    counts = [torch.zeros(2) for _ in range(world)]
    dist.all_gather(counts, torch.tensor([float(iterations), -1.0]))
    if len({tuple(c.tolist()) for c in counts}) != 1:
        print(f"rank {rank}: iteration counts differ: {[c.tolist() for c in counts]}", file=sys.stderr)
        sys.exit(3)
    print(f"rank {rank}: {iterations} iterations")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
