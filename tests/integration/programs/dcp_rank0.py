"""torch.distributed.checkpoint saved from rank 0 only (a habit from torch.save): DCP's save plans
the checkpoint with collectives over the whole group, so rank 0 waits in them while rank 1 goes on
to the next step's all-reduce. argv[1]: checkpoint directory; argv[2] == "all": every rank saves
(correct)."""
import datetime
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6))
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Linear(8, 4)
for step in range(3):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)  # @grads
    if step == 1 and (rank == 0 or sys.argv[2:] == ["all"]):
        dcp.save({"model": model.state_dict()}, checkpoint_id=sys.argv[1])  # @save
dist.barrier()
dist.destroy_process_group()
