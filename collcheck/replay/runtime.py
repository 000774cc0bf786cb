"""Execute one rank's replay plan with torch.distributed (gloo, CPU). Torch and stdlib only.

This file is the body of every script `collcheck replay --emit-script` writes (copied
verbatim, plan embedded), and the replay worker runs the same functions: an emitted
script behaves exactly like the replay.

A plan is JSON: {"world": N, "timeout_s": T, "ranks": [[action, ...] per rank]}.
Actions, in the rank's recorded order:
  {"k": "new", "ranks": [...], "desc": str|None, "name": ..., "s": site}   new_group (every rank)
  {"k": "destroy", "name": ..., "all": bool}                               destroy_process_group
  {"k": "op", "i": id, "op": wire op, "g": group, "t": [[dtype, shape]], "r": reduce op,
   "p": root/peer (global rank), "tag": int, "api": str, "role": str, "label": str,
   "s": [file, line, function], "a": async, "q": batch id, "w": [ids to wait for first],
   "e": the recorded call raised and the program went on}
  {"k": "end", "state": finished|raised|killed, "m": message, "w": [ids]}
Tensors are zeros of the recorded dtypes and shapes: values never matter, because the
recorded sequence is replayed as it is (no data-dependent control flow is re-executed).

Call sites and purpose roles: each op is issued through small trampoline functions whose
code objects carry the recorded call site (file, line, function) and, for calls that torch
internals made (DDP, join), the name of that internal. A recorder such as collcheck then
attributes the replayed call to the same site and role as the recorded one.

A plan's strings come from a log, from another machine: they reach code objects only as
attributes (never source text) and messages only by repr() (escape sequences shown, not acted on).
"""

import datetime
import functools
import os
import sys
import time
import types

# purpose role -> a torch function that plays it; phase -> a torch function that encloses it, as
# "file:function" (file relative to the torch package: the recorder keys its tables by both)
_DDP, _JOIN, _UTILS = "nn/parallel/distributed.py", "distributed/algorithms/join.py", "distributed/utils.py"
_FSDP2, _FSDP1 = "distributed/fsdp/_fully_shard/", "distributed/fsdp/"
ROLE_FUNCTION = {
    "backward-sync flag": f"{_DDP}:_check_global_requires_backward_grad_sync",
    "not-joined count": f"{_JOIN}:_get_num_nonjoined_procs",
    "gradient bucket": f"{_DDP}:_match_all_reduce_for_bwd_pass",
    "unused-parameter map": f"{_DDP}:_match_unused_params_allreduce",
    "authoritative rank": f"{_DDP}:_find_common_rank",
    "buffer broadcast": f"{_DDP}:_sync_module_buffers",
    "module state broadcast": f"{_UTILS}:_sync_module_states",
    "parameter shape check": f"{_UTILS}:_verify_param_shape_across_processes",
    "delayed all-reduce": f"{_DDP}:_delayed_all_reduce_hook",
    "FSDP unshard all-gather": f"{_FSDP2}_fsdp_collectives.py:foreach_all_gather",
    "FSDP gradient reduce": f"{_FSDP2}_fsdp_collectives.py:foreach_reduce",
    "SyncBatchNorm statistics": "nn/modules/_functions.py:forward",
    "SyncBatchNorm gradient": "nn/modules/_functions.py:backward",
    "checkpoint planning": "distributed/checkpoint/utils.py:all_gather_object",
    # knowledge/torch_internals/training.py
    "PowerSGD uncompressed bucket": "distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py:powerSGD_hook",
    "PowerSGD P": "distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py:unpack_uncompressed_tensors_and_allreduce_ps",
    "PowerSGD Q": "distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py:compute_qs",
    "quantized gradient bucket": "distributed/algorithms/ddp_comm_hooks/quantization_hooks.py:quantize_and_allgather",
    "gradient norm": "distributed/fsdp/fully_sharded_data_parallel.py:clip_grad_norm_",
    "found-inf flag": "distributed/fsdp/sharded_grad_scaler.py:unscale_",
    "FSDP2 gradient redistribute": "distributed/fsdp/_fully_shard/_fsdp_param.py:_get_grad_inner_tensor",
    "ZeRO parameter broadcast": "distributed/optim/zero_redundancy_optimizer.py:_broadcast_params_from_rank",
    "ZeRO state consolidation": "distributed/optim/zero_redundancy_optimizer.py:_broadcast_object",
    "model averaging": "distributed/algorithms/model_averaging/utils.py:average_parameters",
    "DTensor RNG state sync": "distributed/tensor/_random.py:__init__",
    "DTensor torch.equal vote": "distributed/tensor/_dispatch.py:_dispatch_fast_path_python_tail",
    "loss_parallel softmax statistics": "distributed/tensor/parallel/loss.py:_log_softmax",
    "loss_parallel NLL reduction": "distributed/tensor/parallel/loss.py:_nll_loss_forward",
    "CP ring attention KV rotation":
        "distributed/tensor/experimental/_context_parallel/_attention.py:_templated_ring_attention",
    "CP ring attention backward rotation":
        "distributed/tensor/experimental/_context_parallel/_attention.py:_templated_ring_attention_backward",
    "CP unshard": "distributed/tensor/experimental/_context_parallel/_attention.py:context_parallel_unshard",
    "state_dict broadcast from rank 0": "distributed/_state_dict_utils.py:_broadcast_state_dict",
    "state_dict all-gather": "distributed/_state_dict_utils.py:_all_gather_sharded_tensor",
}
PHASE_FUNCTION = {
    "join() shadow": f"{_DDP}:main_hook",
    "join() final sync": f"{_DDP}:_sync_final_model",
    "join()": f"{_JOIN}:__exit__",
    "ZeRO join() shadow": "distributed/optim/zero_redundancy_optimizer.py:main_hook",
    "DDP forward": f"{_DDP}:_pre_forward",
    "DDP init": f"{_DDP}:_ddp_init_helper",
    "FSDP2 forward": f"{_FSDP2}_fsdp_param_group.py:pre_forward",
    "FSDP2 prefetch": f"{_FSDP2}_fsdp_param_group.py:_prefetch_unshard",
    "FSDP2 backward": f"{_FSDP2}_fsdp_param_group.py:post_backward",
    "FSDP2 init": f"{_FSDP2}_fsdp_state.py:_lazy_init",
    "FSDP forward": f"{_FSDP1}_runtime_utils.py:_pre_forward",
    "FSDP backward": f"{_FSDP1}_runtime_utils.py:_post_backward_hook",
    "FSDP prefetch": f"{_FSDP1}_runtime_utils.py:_prefetch_handle",
    "FSDP init": f"{_FSDP1}fully_sharded_data_parallel.py:__init__",
    "checkpoint save": "distributed/checkpoint/state_dict_saver.py:save",
    "checkpoint load": "distributed/checkpoint/state_dict_loader.py:load",
    # knowledge/torch_internals/training.py
    "DDP backward": "distributed/algorithms/ddp_comm_hooks/default_hooks.py:allreduce_hook",
    "ZeRO step": "distributed/optim/zero_redundancy_optimizer.py:step",
    "ZeRO consolidate_state_dict": "distributed/optim/zero_redundancy_optimizer.py:consolidate_state_dict",
    "PostLocalSGD step": "distributed/optim/post_localSGD_optimizer.py:step",
    "FSDP state_dict": "distributed/fsdp/_state_dict_utils.py:_pre_state_dict_hook",
    "FSDP load_state_dict": "distributed/fsdp/_state_dict_utils.py:_pre_load_state_dict_hook",
    "FSDP optim state_dict": "distributed/fsdp/fully_sharded_data_parallel.py:_optim_state_dict_impl",
    "FSDP optim state_dict load": "distributed/fsdp/fully_sharded_data_parallel.py:_optim_state_dict_to_load_impl",
}
_REDUCER = "autograd/graph.py:_engine_run_backward"  # DDP's C++ reducer issues bucket all-reduces below it
# FSDP2's roles name the module ("FSDP unshard all-gather of layers.0"): the recorder reads it from
# the `self` of these frames (an FSDP parameter group's `_module_fqn`)
_FSDP_OBJECT_FRAME = {"FSDP unshard all-gather": f"{_FSDP2}_fsdp_param_group.py:unshard",
                      "FSDP gradient reduce": f"{_FSDP2}_fsdp_param_group.py:post_backward"}

_trampolines = {}
_TEMPLATES = {}
MAX_LINE = 2**31 - 1  # a code object's first line is a C int


def _template(with_self):
    """The trampoline's code, compiled once from fixed source: a log's file and function names and
    its line go into code objects only as attributes (`replace`), never into source text."""
    code = _TEMPLATES.get(with_self)
    if code is None:
        args = "self, __f" if with_self else "__f"
        ns = {}
        exec(compile(f"def _t({args}, *__a, **__k): return __f(*__a, **__k)\n", "<replay>", "exec"), ns)
        code = _TEMPLATES[with_self] = ns["_t"].__code__
    return code


def trampoline(filename, name, line, with_self=False):
    """A function `t(f, *a, **k) -> f(*a, **k)` whose frame reads as `name` at filename:line
    (`with_self`: `t(self, f, ...)`, a frame with a `self` local, as a method's).

    The recorded values come from a log: a file or function name that is not a string reads as
    "?", a line that is not an integer in 1..2**31-1 as line 1 (setting the line is O(1): no
    padding, whatever the number)."""
    filename = filename if isinstance(filename, str) else "?"
    name = name if isinstance(name, str) else "?"
    line = line if type(line) is int and 1 <= line <= MAX_LINE else 1
    key = (filename, name, line, with_self)
    t = _trampolines.get(key)
    if t is None:
        code = _template(bool(with_self)).replace(co_filename=filename, co_name=name, co_firstlineno=line)
        if hasattr(code, "co_qualname"):
            code = code.replace(co_qualname=name)
        t = _trampolines[key] = types.FunctionType(code, {})
    return t


def role_functions(role, label):
    """Torch frames ("file:function"), innermost first, that make a recorder see `role` (and the
    label's phase)."""
    if role is None:
        return []
    phase = label.split(": ", 1)[0] if label and ": " in label else None
    if role == "bucket rebuild":
        return [PHASE_FUNCTION["join() shadow" if phase == "join() shadow" else "DDP forward"]]
    if role == "gradient bucket" and phase == "DDP backward":
        return [_REDUCER]
    base, _, module = role.partition(" of ")
    names = [ROLE_FUNCTION.get(base, ROLE_FUNCTION["gradient bucket"])]
    if module and base in _FSDP_OBJECT_FRAME:  # (frame, the module its `self` names)
        names.append((_FSDP_OBJECT_FRAME[base], "" if module == "the root module" else module))
    if phase in PHASE_FUNCTION:
        names.append(PHASE_FUNCTION[phase])
    return names


class _ParamGroup:
    """What the recorder reads from an FSDP2 parameter group: its module's name."""

    def __init__(self, fqn):
        self._module_fqn = fqn


def _new_backward_pass() -> None:
    """Bucket 0 of a recorded backward pass: tell the recorder a pass begins, as the patched
    autograd entry point does in a real job (DDP buckets are numbered per backward pass)."""
    try:
        from ..capture import session

        rec = session.recorder()
        if rec is not None:
            rec.count_backward_pass()
    except Exception:
        pass


def call_as(op, fn, /, *args, **kwargs):
    """Call fn from the recorded call site, through the recorded torch internals."""
    import torch

    if op.get("role") == "gradient bucket" and (op.get("label") or "").startswith("DDP backward") and (
            op.get("label") or "").endswith(" 0"):
        _new_backward_pass()
    call = functools.partial(fn, *args, **kwargs)
    torch_dir = os.path.dirname(torch.__file__)
    for name in role_functions(op.get("role"), op.get("label")):  # innermost first
        obj = None
        if isinstance(name, tuple):
            name, obj = name[0], _ParamGroup(name[1])
        file, func = name.split(":", 1)
        t = trampoline(os.path.join(torch_dir, *file.split("/")), func, 1, with_self=obj is not None)
        call = functools.partial(t, obj, call) if obj is not None else functools.partial(t, call)
    site = op.get("s")
    if isinstance(site, (list, tuple)) and len(site) == 3:  # [file, line, function] as recorded
        call = functools.partial(trampoline(site[0], site[2], site[1]), call)
    return call()


class Replayer:
    def __init__(self, plan, rank):
        import torch
        import torch.distributed as dist

        self.torch, self.dist = torch, dist
        self.plan = plan
        self.rank = rank
        self.actions = plan["ranks"][rank]
        self.timeout = datetime.timedelta(seconds=float(os.environ.get("REPLAY_TIMEOUT_S", plan["timeout_s"])))
        self.groups = {"0": None}  # recorded group name -> ProcessGroup (None: the default group)
        self.pending = {}  # op id -> Work of an async op not waited for yet
        self.verbose = os.environ.get("REPLAY_VERBOSE", "") not in ("", "0")

    # -- tensors and groups -------------------------------------------------------------
    def zeros(self, spec):
        dtype, shape = spec
        return self.torch.zeros(tuple(shape), dtype=getattr(self.torch, dtype))

    def group(self, op):
        name = op["g"]
        if name not in self.groups:
            raise RuntimeError(f"replay: rank {self.rank} has no group {name!r} for {op['op']} #{op['i']}")
        return self.groups[name]

    def size(self, pg):
        return self.dist.get_world_size(pg)

    # -- one op ----------------------------------------------------------------------------
    def issue(self, op):
        """Issue one recorded op; returns its Work for async ops, else None."""
        dist, torch = self.dist, self.torch
        kind, api, pg, a = op["op"], op.get("api"), self.group(op), bool(op.get("a"))
        ts = [self.zeros(t) for t in op.get("t") or []]
        t = ts[0] if ts else torch.zeros(1)
        red = dist.ReduceOp.RedOpType(op["r"] if op.get("r") is not None else 0)
        root = op.get("p")
        n = self.size(pg)
        me = dist.get_rank()

        def cat(x):  # output of gather-into-tensor / input of reduce-scatter-tensor
            shape = tuple(x.shape)
            return torch.zeros((n * shape[0],) + shape[1:] if shape else (n,), dtype=x.dtype)

        def go(fn, *args, **kw):
            return call_as(op, fn, *args, **kw)

        if kind == "allreduce_":
            return go(dist.all_reduce, t, op=red, group=pg, async_op=a)
        if kind == "allreduce_coalesced_":
            return go(dist.all_reduce_coalesced, ts, op=red, group=pg, async_op=a)
        if kind == "broadcast_":
            return go(dist.broadcast, t, src=root, group=pg, async_op=a)
        if kind == "reduce_":
            return go(dist.reduce, t, dst=root, op=red, group=pg, async_op=a)
        if kind == "allgather_":
            return go(dist.all_gather, [torch.zeros_like(t) for _ in range(n)], t, group=pg, async_op=a)
        if kind == "_allgather_base_":
            return go(dist.all_gather_into_tensor, cat(t), t, group=pg, async_op=a)
        if kind == "allgather_coalesced_":
            # one output list per rank, each with a tensor per input
            return go(dist.all_gather_coalesced, [[torch.zeros_like(x) for x in ts] for _ in range(n)], ts,
                      group=pg, async_op=a)
        if kind in ("allgather_into_tensor_coalesced_", "reduce_scatter_tensor_coalesced_"):
            def coalesced():
                with dist._coalescing_manager(group=pg, async_ops=a) as cm:
                    for x in ts:
                        if kind.startswith("allgather"):
                            dist.all_gather_into_tensor(cat(x), x, group=pg)
                        else:
                            dist.reduce_scatter_tensor(x, cat(x), op=red, group=pg)
                return cm if a else None
            return go(coalesced)
        if kind == "gather_":
            lst = [torch.zeros_like(t) for _ in range(n)] if me == root else None
            return go(dist.gather, t, lst, dst=root, group=pg, async_op=a)
        if kind == "scatter_":
            lst = [torch.zeros_like(t) for _ in range(n)] if me == root else None
            return go(dist.scatter, t, lst, src=root, group=pg, async_op=a)
        if kind == "reduce_scatter_":
            return go(dist.reduce_scatter, t, [torch.zeros_like(t) for _ in range(n)], op=red, group=pg, async_op=a)
        if kind == "_reduce_scatter_base_":
            return go(dist.reduce_scatter_tensor, t, cat(t), op=red, group=pg, async_op=a)
        if kind == "alltoall_":  # shapes are not compared for all-to-all: one element per peer
            dts = [x.dtype for x in ts] or [torch.float32]
            ins = [torch.zeros(1, dtype=dts[k % len(dts)]) for k in range(n)]
            return go(dist.all_to_all, [torch.zeros_like(x) for x in ins], ins, group=pg, async_op=a)
        if kind == "alltoall_base_":
            sp = op.get("sp")
            if sp is not None and t.dim() >= 1:  # the recorded input and splits
                ins, outs = list(sp[0]), list(sp[1])
                rows = sum(outs) if outs else t.shape[0]  # even output splits: the input's size
                out = torch.zeros((rows,) + tuple(t.shape[1:]), dtype=t.dtype)
                return go(dist.all_to_all_single, out, t, outs or None, ins or None, group=pg, async_op=a)
            x = torch.zeros(n, dtype=t.dtype)
            return go(dist.all_to_all_single, torch.zeros_like(x), x, group=pg, async_op=a)
        if kind == "barrier":
            return go(dist.barrier, group=pg, async_op=a)
        if kind == "monitored_barrier_":
            return go(dist.monitored_barrier, group=pg, timeout=self.timeout)
        tag = op.get("tag") or 0
        if kind == "send":
            if a or api == "isend":
                return go(dist.isend, t, dst=root, group=pg, tag=tag)
            return go(dist.send, t, dst=root, group=pg, tag=tag)
        if kind in ("recv_", "recv_any_source_"):
            src = root if kind == "recv_" else None
            if a or api == "irecv":
                return go(dist.irecv, t, src=src, group=pg, tag=tag)
            return go(dist.recv, t, src=src, group=pg, tag=tag)
        raise RuntimeError(f"replay: unsupported op {kind!r}")

    def batch(self, ops):
        """batch_isend_irecv of consecutive recorded P2P ops of one call."""
        dist = self.dist
        p2p = []
        for op in ops:
            t = self.zeros(op["t"][0]) if op.get("t") else self.torch.zeros(1)
            fn = dist.isend if op["op"] == "send" else dist.irecv
            p2p.append(dist.P2POp(fn, t, op["p"], self.group(op), op.get("tag") or 0))
        return call_as(ops[0], dist.batch_isend_irecv, p2p)

    # -- the rank's sequence -------------------------------------------------------------------
    def wait_for(self, ids):
        for i in ids or ():
            work = self.pending.pop(i, None)
            if work is not None:
                work.wait()

    def run(self):
        dist = self.dist
        dist.init_process_group("gloo", timeout=self.timeout)
        k, actions = 0, self.actions
        while k < len(actions):
            act = actions[k]
            self.wait_for(act.get("w"))
            kind = act["k"]
            if kind == "new":
                fn = dist.new_group
                pg = call_as(act, fn, act["ranks"], timeout=self.timeout, group_desc=act.get("desc") or None)
                if act.get("name") is not None and pg is not None and pg is not dist.GroupMember.NON_GROUP_MEMBER:
                    self.groups[act["name"]] = pg
            elif kind == "destroy":
                if act.get("all", True):
                    self.wait_for(list(self.pending))
                    dist.destroy_process_group()
                elif self.groups.get(act.get("name")) is not None:
                    dist.destroy_process_group(self.groups.pop(act["name"]))
            elif kind == "end":
                self.end(act)
            else:
                ops = [act]
                if act.get("api") == "batch_isend_irecv" and act.get("q") is not None:
                    while k + 1 < len(actions) and actions[k + 1].get("q") == act["q"] and actions[k + 1]["k"] == "op":
                        k += 1
                        ops.append(actions[k])
                if self.verbose:
                    print(f"[replay rank {self.rank}] {act['op']!r} group {act['g']!r} #{act['i']!r}", file=sys.stderr,
                          flush=True)
                try:
                    if len(ops) > 1:
                        works = self.batch(ops)
                        for op, w in zip(ops, works or ()):
                            self.pending[op["i"]] = w
                    else:
                        work = self.issue(act)
                        if hasattr(work, "wait"):  # async ops (recv returns the sender's rank)
                            self.pending[act["i"]] = work
                except Exception as exc:
                    if not act.get("e") or k + 1 >= len(actions) or actions[k + 1]["k"] == "end":
                        raise
                    print(f"[replay rank {self.rank}] {act['op']!r} #{act['i']!r} raised as recorded: {str(exc)!r}",
                          file=sys.stderr, flush=True)
            k += 1

    def end(self, act):
        state = act.get("state", "finished")
        if state == "raised":
            raise RuntimeError(f"replay: rank {self.rank} raised here in the recorded run: {act.get('m', '')!r}")
        if state == "killed":
            sys.stderr.write(f"replay: rank {self.rank} was killed here in the recorded run\n")
            sys.stderr.flush()
            time.sleep(0.5)  # let a recorder flush its buffered records
            os._exit(137)


def main(plan, rank=None):
    """Replay `plan` as this process's rank (RANK/WORLD_SIZE/MASTER_* from torchrun or the replayer)."""
    rank = int(os.environ["RANK"]) if rank is None else rank
    world = int(os.environ.get("WORLD_SIZE", plan["world"]))
    if world != plan["world"]:
        sys.exit(f"this plan needs {plan['world']} processes (torchrun --nproc-per-node {plan['world']}), not {world}")
    Replayer(plan, rank).run()
