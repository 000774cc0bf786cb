"""Every public collective, P2P op, group helper, functional collective and DTensor path, on 2 ranks.

Each call sits on one line ending in a `# @name` marker: the test reads the marker's line
number as the expected call site. Prints `RESULT name value` lines for the test to check.
"""
import datetime
import os
import warnings

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _coalescing_manager

T = datetime.timedelta(seconds=20)


def out(name, value):
    os.write(1, f"RESULT {dist.get_rank()} {name} {value!r}\n".encode())  # one write: ranks' lines never mix


def main():
    warnings.simplefilter("ignore")
    dist.init_process_group("gloo", timeout=T)  # @init
    rank, world = dist.get_rank(), dist.get_world_size()
    other = 1 - rank

    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t)  # @all_reduce_sum
    out("all_reduce_sum", t.tolist())
    t = torch.full((2, 2), float(rank + 1), dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # @all_reduce_max
    out("all_reduce_max", t.tolist())
    t = torch.arange(4, dtype=torch.int64) * (rank + 1)
    dist.broadcast(t, src=1)  # @broadcast
    out("broadcast", t.tolist())
    t = torch.ones(5) * (rank + 1)
    dist.reduce(t, dst=1, op=dist.ReduceOp.MIN)  # @reduce
    out("reduce", t.tolist())
    parts = [torch.zeros(2, dtype=torch.int32) for _ in range(world)]
    dist.all_gather(parts, torch.full((2,), rank, dtype=torch.int32))  # @all_gather
    out("all_gather", [p.tolist() for p in parts])
    big = torch.zeros(world * 3)
    dist.all_gather_into_tensor(big, torch.full((3,), float(rank)))  # @all_gather_into_tensor
    out("all_gather_into_tensor", big.tolist())
    if hasattr(dist, "all_gather_single"):  # torch 2.13: FSDP2 calls these two
        single = torch.zeros(world * 2)
        dist.all_gather_single(single, torch.full((2,), float(rank)))  # @all_gather_single
        out("all_gather_single", single.tolist())
        rss = torch.zeros(2)
        dist.reduce_scatter_single(rss, torch.arange(4, dtype=torch.float32) * (rank + 1))  # @reduce_scatter_single
        out("reduce_scatter_single", rss.tolist())
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})  # @all_gather_object
    out("all_gather_object", objs)
    try:
        outs = [[torch.zeros(2) for _ in range(2)] for _ in range(world)]
        dist.all_gather_coalesced(outs, [torch.ones(2) * rank, torch.ones(2) * 10])  # @all_gather_coalesced
        out("all_gather_coalesced", [[x.tolist() for x in o] for o in outs])
    except Exception as exc:
        out("all_gather_coalesced", f"raised {type(exc).__name__}")
    glist = [torch.zeros(4) for _ in range(world)] if rank == 0 else None
    dist.gather(torch.full((4,), float(rank)), gather_list=glist, dst=0)  # @gather
    out("gather", [g.tolist() for g in glist] if glist else None)
    gobj = [None] * world if rank == 1 else None
    dist.gather_object(f"r{rank}", gobj, dst=1)  # @gather_object
    out("gather_object", gobj)
    s = torch.zeros(2, dtype=torch.float16)
    dist.scatter(s, [torch.full((2,), float(i + 7), dtype=torch.float16) for i in range(world)] if rank == 1 else None, src=1)  # @scatter
    out("scatter", s.tolist())
    sol = [None]
    dist.scatter_object_list(sol, [f"obj{i}" for i in range(world)] if rank == 0 else None, src=0)  # @scatter_object_list
    out("scatter_object_list", sol)
    rs = torch.zeros(2)
    try:
        dist.reduce_scatter(rs, [torch.ones(2) * (rank + 1) for _ in range(world)])  # @reduce_scatter
        out("reduce_scatter", rs.tolist())
    except Exception as exc:
        out("reduce_scatter", f"raised {type(exc).__name__}: {exc}")
    rst = torch.zeros(2)
    dist.reduce_scatter_tensor(rst, torch.arange(4, dtype=torch.float32) + rank)  # @reduce_scatter_tensor
    out("reduce_scatter_tensor", rst.tolist())
    a2a = [torch.zeros(1) for _ in range(world)]
    dist.all_to_all(a2a, [torch.tensor([float(10 * rank + i)]) for i in range(world)])  # @all_to_all
    out("all_to_all", [x.tolist() for x in a2a])
    a2s = torch.zeros(3 if rank == 0 else 2)
    send_split = [1, 2] if rank == 0 else [2, 0]
    recv_split = [1, 2] if rank == 0 else [2, 0]
    dist.all_to_all_single(a2s, torch.arange(3.0 if rank == 0 else 2.0) + 100 * rank, recv_split, send_split)  # @all_to_all_single
    out("all_to_all_single", a2s.tolist())
    bol = [rank, "x"] if rank == 0 else [None, None]
    dist.broadcast_object_list(bol, src=0)  # @broadcast_object_list
    out("broadcast_object_list", bol)
    dist.barrier()  # @barrier
    dist.monitored_barrier(timeout=T)  # @monitored_barrier
    p = torch.zeros(6, dtype=torch.int16)
    if rank == 0:
        dist.send(torch.arange(6, dtype=torch.int16), dst=1, tag=3)  # @send
    else:
        dist.recv(p, src=0, tag=3)  # @recv
    out("send_recv", p.tolist())
    q = torch.zeros(2)
    if rank == 1:
        dist.isend(torch.tensor([5.0, 6.0]), dst=0).wait()  # @isend
    else:
        dist.irecv(q, src=1).wait()  # @irecv
    out("isend_irecv", q.tolist())
    b = torch.zeros(3)
    ops = [dist.P2POp(dist.isend, torch.full((3,), float(rank)), other), dist.P2POp(dist.irecv, b, other)]
    for w in dist.batch_isend_irecv(ops):  # @batch_isend_irecv
        w.wait()
    out("batch_isend_irecv", b.tolist())
    sol2 = [None, None]
    if rank == 0:
        dist.send_object_list(["hello", 42], dst=1)  # @send_object_list
    else:
        dist.recv_object_list(sol2, src=0)  # @recv_object_list
    out("object_p2p", sol2)
    c1, c2 = torch.ones(2) * (rank + 1), torch.ones(3) * (rank + 1)
    with _coalescing_manager():  # @coalescing
        dist.all_reduce(c1)
        dist.all_reduce(c2)
    out("coalesced", [c1.tolist(), c2.tolist()])

    g = dist.new_group([0, 1], timeout=T)  # @new_group
    only0 = dist.new_group([0], timeout=T)  # @new_group_0
    t = torch.ones(2) * (rank + 1)
    dist.all_reduce(t, group=g, op=dist.ReduceOp.PRODUCT)  # @group_all_reduce
    out("group_all_reduce", t.tolist())
    if rank == 0:
        t = torch.ones(1)
        dist.all_reduce(t, group=only0)  # @only0_all_reduce
    sub, subs = dist.new_subgroups(group_size=1, timeout=T)  # @new_subgroups
    t = torch.ones(1) * (rank + 3)
    dist.all_reduce(t, group=sub)  # @sub_all_reduce
    out("sub_all_reduce", t.tolist())

    import torch.distributed._functional_collectives as funcol

    r = funcol.all_reduce(torch.ones(4) * (rank + 1), "sum", dist.group.WORLD)  # @funcol
    out("funcol", funcol.wait_tensor(r).tolist())

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (world,))  # @mesh
    full = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    dt = distribute_tensor(full, mesh, [Shard(0)])  # @distribute
    rep = dt.redistribute(mesh, [Replicate()])  # @redistribute
    out("redistribute", rep.to_local().tolist())
    dist.barrier()  # @final_barrier
    dist.destroy_process_group()
    save_live_state(rank)


def save_live_state(rank: int) -> None:
    """What live mode would publish now (every group's hash and signatures, P2P channels), beside
    the log: the compiled and the Python path must agree (tests/test_fastpath.py)."""
    import json
    import os

    from collcheck.capture import session

    rec = session.recorder()
    if rec is None or rec.writer is None:
        return
    with rec.writer.lock:
        state = rec.live_state()
    plain = {kind: {name: [e[0], e[1], e[2].hex(), *e[3:4], {str(k): v for k, v in (e[4] if len(e) > 4 else {}).items()}]
                    for name, e in table.items()} for kind, table in state.items()}
    with open(os.path.join(os.path.dirname(rec.writer.path), f"live-state-{rank}.json"), "w") as f:
        json.dump(plain, f, sort_keys=True)


if __name__ == "__main__":
    main()
