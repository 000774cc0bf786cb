"""The "main process first" idiom (transformers' and accelerate's main_process_first, written
out): ranks other than 0 wait at a barrier while rank 0 prepares a cache, then rank 0 releases
them at its own barrier and the others read the cache.

shape: d (two barriers under complementary conditions) — `if rank != 0: dist.barrier()` ...
`if rank == 0: dist.barrier()`: every rank reaches exactly one of them.
truth: correct — one barrier per rank. Exits 0.
"""
import datetime
import json
import os
import tempfile

import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    folder = os.environ.get("CORPUS_OUT") or tempfile.gettempdir()
    cache = os.path.join(folder, f"ok_main_process_first-{os.environ.get('MASTER_PORT', '0')}.json")
    if rank != 0:
        dist.barrier()  # wait for rank 0 to build the cache
    if not os.path.exists(cache):
        with open(cache, "w") as f:
            json.dump({"vocab": ["a", "b", "c"]}, f)
    with open(cache) as f:
        vocab = json.load(f)["vocab"]
    if rank == 0:
        dist.barrier()  # release the others
    dist.barrier()
    if rank == 0:
        os.remove(cache)
    print(f"rank {rank}: vocab {vocab}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
