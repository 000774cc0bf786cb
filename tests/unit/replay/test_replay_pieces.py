"""Replay's pieces in-process (collcheck/replay/plan.py, runtime.py): shapes shrunk with their size
relations, the torch-function chains that make the recorder see the recorded purpose, the
trampoline that gives a replayed call its recorded call site."""

from __future__ import annotations

import sys

from collcheck.replay import runtime
from collcheck.replay.plan import shrink_shapes


def test_shrink_keeps_size_relations():
    from collcheck.replay.plan import Plan

    shapes = [[1000, 10], [10, 1000], [10000], [5000, 2], [3], [100, 100]]
    acts = [[{"k": "op", "i": i, "op": "allreduce_", "g": "0", "t": [["float32", s]]} for i, s in enumerate(shapes)]]
    plan = Plan(1, acts, [0])
    shrink_shapes(plan, 64)
    new = [a["t"][0][1] for a in plan.ranks[0]]
    numel = [__import__("math").prod(s) for s in new]
    old_numel = [__import__("math").prod(s) for s in shapes]
    assert all(n <= 128 for n in numel)
    assert len({tuple(s) for s in new}) == len({tuple(s) for s in shapes})  # distinct shapes stay distinct
    for a in range(len(shapes)):
        assert len(new[a]) == len(shapes[a])
        for b in range(len(shapes)):
            assert (old_numel[a] == old_numel[b]) == (numel[a] == numel[b])
            assert (old_numel[a] < old_numel[b]) == (numel[a] < numel[b])


def test_role_chains_match_the_recorder():
    """The runtime's torch-function chains make the recorder see the recorded role and label phase."""
    from collcheck.capture import callsite
    from collcheck.knowledge import torch_internals as frameworks

    roles = set(frameworks.ROLES.values()) | {"bucket rebuild"}
    phases = set(frameworks.PHASES.values())
    assert roles - {"bucket rebuild"} <= set(runtime.ROLE_FUNCTION), roles - set(runtime.ROLE_FUNCTION)
    assert phases <= set(runtime.PHASE_FUNCTION), phases - set(runtime.PHASE_FUNCTION)
    for role in roles:
        for phase in [None, *phases]:
            if role == "bucket rebuild" and phase not in ("DDP forward", "join() shadow"):
                continue  # the recorder labels bucket rebuilds with these phases only
            label = f"{phase}: {role}" if phase else role
            want_role, want_label = callsite._purpose(runtime.role_functions(role, label))
            assert want_role == role, (role, label)
            if phase and phase != "DDP init":
                assert want_label.startswith(phase), (role, label, want_label)
    assert callsite._purpose(runtime.role_functions("gradient bucket", "DDP backward: gradient bucket")) == (
        "gradient bucket", "DDP backward: gradient bucket")


def test_fsdp_roles_replay_with_their_module():
    """An FSDP2 role names its module; the replayed call is issued through a frame whose `self`
    names the same module, so the recorder sees the recorded role."""
    from collcheck.capture import callsite

    seen = []

    def probe():
        _, names, _, _ = callsite.walk(sys._getframe(1), False)
        seen.append(callsite._purpose(names))

    for role, phase in [("FSDP unshard all-gather of layers.3.experts.1", "FSDP2 forward"),
                        ("FSDP gradient reduce of the root module", "FSDP2 backward")]:
        runtime.call_as({"role": role, "label": f"{phase}: {role}", "s": ["/somewhere/train.py", 7, "step"]}, probe)
        assert seen[-1] == (role, f"{phase}: {role}"), seen[-1]


def test_trampoline_reports_the_recorded_site():
    seen = []

    def probe():
        f = sys._getframe(1)
        seen.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))

    runtime.trampoline("/somewhere/train.py", "<module>", 42)(probe)
    assert seen == [("/somewhere/train.py", 42, "<module>")]


REPLAYED_KINDS = ["allreduce_", "allreduce_coalesced_", "broadcast_", "reduce_", "allgather_", "_allgather_base_",
                  "allgather_coalesced_", "allgather_into_tensor_coalesced_", "reduce_scatter_tensor_coalesced_",
                  "gather_", "scatter_", "reduce_scatter_", "_reduce_scatter_base_", "alltoall_", "alltoall_base_",
                  "barrier", "monitored_barrier_"]


def test_the_runtime_issues_every_collective_kind_on_a_one_rank_group(monkeypatch):
    """Each op kind a plan may hold is issued by the replay runtime as torch's own call, with the
    recorded call site as its caller's frame: on a one-rank gloo group in this process (the
    multi-rank replays run as jobs with -m slow)."""
    import torch.distributed as dist
    from support.jobs import free_port

    seen = []
    spec = [["float32", [4, 2]]]
    acts = [{"k": "op", "i": i, "op": kind, "g": "0", "t": spec * (2 if "coalesced" in kind else 1), "p": 0,
             "a": kind == "allreduce_", "s": ["/job/train.py", 40 + i, "step"]}
            for i, kind in enumerate(REPLAYED_KINDS)]
    acts.insert(1, {"k": "op", "i": 99, "op": "alltoall_base_", "g": "0", "t": [["float32", [3]]], "sp": [[3], [3]]})
    acts.append({"k": "op", "i": 100, "op": "allreduce_", "g": "0", "t": spec, "w": [0]})
    plan = {"world": 1, "timeout_s": 30, "ranks": [acts + [{"k": "end", "state": "finished"}]]}
    for key, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0", "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(key, value)
    replayer = runtime.Replayer(plan, 0)
    issue = replayer.issue

    def recorded_issue(op):
        seen.append(op["op"])
        return issue(op)

    replayer.issue = recorded_issue
    try:
        replayer.run()
        assert not replayer.pending  # the async all-reduce was waited for by the op that names it
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    assert seen == [a["op"] for a in acts]
