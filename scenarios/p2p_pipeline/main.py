"""Valid: a 4-stage pipeline passing activations forward with point-to-point ops.

Micro-batch 0 uses blocking send/recv, micro-batch 1 isend/irecv, micro-batch 2
batch_isend_irecv (the P2POp API used by pipeline schedules).  Every send has a matching
receive on the next stage; the first stage never receives, the last never sends.
"""
import datetime
import os
import torch
import torch.distributed as dist

HIDDEN = 8


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    stage = torch.nn.Linear(HIDDEN, HIDDEN)
    prev_rank = rank - 1 if rank > 0 else None
    next_rank = rank + 1 if rank < world - 1 else None
    outputs = []
    with torch.no_grad():
        for mb in range(3):
            x = torch.full((2, HIDDEN), float(mb)) if prev_rank is None else torch.empty(2, HIDDEN)
            if prev_rank is not None:
                if mb == 0:
                    dist.recv(x, src=prev_rank)
                elif mb == 1:
                    dist.irecv(x, src=prev_rank).wait()
                else:
                    for req in dist.batch_isend_irecv([dist.P2POp(dist.irecv, x, prev_rank)]):
                        req.wait()
            y = stage(x)
            if next_rank is not None:
                if mb == 0:
                    dist.send(y, dst=next_rank)
                elif mb == 1:
                    dist.isend(y, dst=next_rank).wait()
                else:
                    for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, y, next_rank)]):
                        req.wait()
            else:
                outputs.append(y.sum().item())
    if next_rank is None:
        print(f"rank {rank} (last stage): outputs {[round(o, 4) for o in outputs]}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
