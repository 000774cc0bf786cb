"""Every collective on the simulated NCCL backend, used directly (`import collcheck.simnccl`,
init_process_group("simnccl")), each result checked against what NCCL computes; prints "ok N".
Run with 2 or 3 ranks."""
import datetime

import torch
import torch.distributed as dist

import collcheck.simnccl  # noqa: F401 - registers the backend

dist.init_process_group("simnccl", timeout=datetime.timedelta(seconds=20))
rank, world = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "simnccl", dist.get_backend()
checks = 0


def check(got, want):
    global checks
    assert torch.equal(got, want), (rank, got, want)
    checks += 1


t = torch.tensor([float(rank + 1), 2.0])
dist.all_reduce(t)
check(t, torch.tensor([world * (world + 1) / 2, 2.0 * world]))
m = torch.tensor([rank], dtype=torch.int64)
dist.all_reduce(m, op=dist.ReduceOp.MAX)
check(m, torch.tensor([world - 1]))
b = torch.full((3,), float(rank))
dist.broadcast(b, src=world - 1)
check(b, torch.full((3,), float(world - 1)))
parts = [torch.zeros(2) for _ in range(world)]
dist.all_gather(parts, torch.full((2,), float(rank)))
check(torch.stack(parts), torch.arange(world, dtype=torch.float32).repeat_interleave(2).view(world, 2))
flat = torch.zeros(2 * world)
dist.all_gather_into_tensor(flat, torch.full((2,), float(rank)))
check(flat, torch.arange(world, dtype=torch.float32).repeat_interleave(2))
rs = torch.zeros(2)
dist.reduce_scatter_tensor(rs, torch.arange(2.0 * world))
check(rs, torch.arange(2.0 * world)[2 * rank:2 * rank + 2] * world)
rsl = torch.zeros(1)
dist.reduce_scatter(rsl, [torch.tensor([float(d + rank)]) for d in range(world)])
check(rsl, torch.tensor([float(world * rank + world * (world - 1) / 2)]))
a2a = torch.zeros(world)
dist.all_to_all_single(a2a, torch.tensor([float(10 * rank + d) for d in range(world)]))
check(a2a, torch.tensor([float(10 * s + rank) for s in range(world)]))
outs = [torch.zeros(1) for _ in range(world)]
dist.all_to_all(outs, [torch.tensor([float(10 * rank + d)]) for d in range(world)])
check(torch.cat(outs), torch.tensor([float(10 * s + rank) for s in range(world)]))
red = torch.tensor([float(rank + 1)])
dist.reduce(red, dst=0)
if rank == 0:
    check(red, torch.tensor([world * (world + 1) / 2]))
gathered = [torch.zeros(1) for _ in range(world)] if rank == 0 else None
dist.gather(torch.tensor([float(rank)]), gathered, dst=0)
if rank == 0:
    check(torch.cat(gathered), torch.arange(world, dtype=torch.float32))
sc = torch.zeros(1)
dist.scatter(sc, [torch.tensor([float(d * 5)]) for d in range(world)] if rank == 0 else None, src=0)
check(sc, torch.tensor([float(rank * 5)]))
nxt, prv = (rank + 1) % world, (rank - 1) % world
got = torch.zeros(2)
reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.full((2,), float(rank)), nxt),
                               dist.P2POp(dist.irecv, got, prv)])
for r in reqs:
    r.wait()
check(got, torch.full((2,), float(prv)))
if rank == 0:
    dist.send(torch.tensor([42.0]), 1)
elif rank == 1:
    one = torch.zeros(1)
    dist.recv(one, 0)
    check(one, torch.tensor([42.0]))
sub = dist.new_group([0, 1])
if rank in (0, 1):
    s = torch.tensor([1.0])
    dist.all_reduce(s, group=sub)
    check(s, torch.tensor([2.0]))
objs = [None] * world
dist.all_gather_object(objs, {"rank": rank})
assert objs == [{"rank": r} for r in range(world)], objs
dist.barrier()
print(f"ok {checks}", flush=True)
dist.destroy_process_group()
