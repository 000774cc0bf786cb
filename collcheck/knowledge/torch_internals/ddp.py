"""DistributedDataParallel, join() and ZeroRedundancyOptimizer (torch 2.13:
torch/nn/parallel/distributed.py, torch/distributed/algorithms/join.py,
torch/distributed/optim/zero_redundancy_optimizer.py, torch/distributed/utils.py)."""

_DDP = "nn/parallel/distributed.py"
_JOIN = "distributed/algorithms/join.py"
_UTILS = "distributed/utils.py"

ROLES = {
    (_DDP, "_check_global_requires_backward_grad_sync"): "backward-sync flag",  # all_reduce of a flag, forward
    (_JOIN, "notify_join_context"): "not-joined count",  # Join.notify_join_context: all_reduce of ones
    (_JOIN, "_get_num_nonjoined_procs"): "not-joined count",
    (_JOIN, "_notify_procs_to_terminate"): "not-joined count",
    (_DDP, "_match_all_reduce_for_bwd_pass"): "gradient bucket",  # _DDPJoinHook.main_hook's shadow
    (_DDP, "_match_unused_params_allreduce"): "unused-parameter map",
    (_DDP, "_find_common_rank"): "authoritative rank",
    (_DDP, "_sync_buffers"): "buffer broadcast",
    (_DDP, "_sync_module_buffers"): "buffer broadcast",
    (_DDP, "_check_and_sync_module_buffers"): "buffer broadcast",
    (_DDP, "_delayed_all_reduce_hook"): "delayed all-reduce",
    # shared helpers (DDP and FSDP1 init call them): the enclosing frame gives the phase
    (_UTILS, "_sync_module_states"): "module state broadcast",
    (_UTILS, "_sync_params_and_buffers"): "module state broadcast",
    (_UTILS, "_verify_param_shape_across_processes"): "parameter shape check",
}
PHASES = {
    (_DDP, "main_hook"): "join() shadow",  # _DDPJoinHook.main_hook
    (_DDP, "_sync_final_model"): "join() final sync",
    (_JOIN, "__exit__"): "join()",
    ("distributed/optim/zero_redundancy_optimizer.py", "main_hook"): "ZeRO join() shadow",
    (_DDP, "_pre_forward"): "DDP forward",
    (_DDP, "_post_forward"): "DDP forward",
    (_DDP, "_ddp_init_helper"): "DDP init",
}
# DDP.__init__ broadcasts the module state through distributed/utils.py (as FSDP1's init does):
# labelled "DDP init" only below this frame
INIT_AT = f"{_DDP}:__init__"
# The C++ reducer issues these with no Python frame of its own: the innermost frame tells them.
# DDP._pre_forward -> reducer._rebuild_buckets (broadcast); DDP's join hook likewise.
BUCKET_REBUILD_AT = (f"{_DDP}:_pre_forward", f"{_DDP}:main_hook")
# Autograd's engine entry (torch/autograd/graph.py) directly below a collective: a C++ autograd
# hook issued it, and in torch 2.13 only DDP's reducer does (FSDP's hooks are Python frames).
REDUCER_AT = "autograd/graph.py:_engine_run_backward"
