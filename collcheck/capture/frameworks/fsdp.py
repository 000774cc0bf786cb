"""FSDP2 (`fully_shard`, torch/distributed/fsdp/_fully_shard/) and FSDP1
(`FullyShardedDataParallel`, torch/distributed/fsdp/), torch 2.13."""

_F2 = "distributed/fsdp/_fully_shard/"
_F1 = "distributed/fsdp/"

ROLES = {
    # _fsdp_collectives.foreach_all_gather -> AllGather.__call__ -> dist.all_gather_single
    (_F2 + "_fsdp_collectives.py", "foreach_all_gather"): "FSDP unshard all-gather",
    # _fsdp_collectives.foreach_reduce: reduce_scatter_single, then all_reduce across replicas (HSDP)
    (_F2 + "_fsdp_collectives.py", "foreach_reduce"): "FSDP gradient reduce",
    # FlatParamHandle._all_gather_flat_param / _reduce_grad (FSDP1)
    (_F1 + "_flat_param.py", "_all_gather_flat_param"): "FSDP unshard all-gather",
    (_F1 + "_runtime_utils.py", "_reduce_grad"): "FSDP gradient reduce",
}
PHASES = {
    (_F2 + "_fsdp_param_group.py", "pre_forward"): "FSDP2 forward",
    (_F2 + "_fsdp_param_group.py", "_prefetch_unshard"): "FSDP2 prefetch",
    (_F2 + "_fsdp_param_group.py", "pre_backward"): "FSDP2 backward",
    (_F2 + "_fsdp_param_group.py", "post_backward"): "FSDP2 backward",
    (_F2 + "_fsdp_state.py", "_pre_forward"): "FSDP2 forward",
    (_F2 + "_fsdp_state.py", "_root_post_backward_final_callback"): "FSDP2 backward",
    (_F2 + "_fsdp_state.py", "_lazy_init"): "FSDP2 init",
    (_F1 + "_runtime_utils.py", "_pre_forward"): "FSDP forward",
    (_F1 + "_runtime_utils.py", "_pre_backward_hook"): "FSDP backward",
    (_F1 + "_runtime_utils.py", "_post_backward_hook"): "FSDP backward",
    (_F1 + "_runtime_utils.py", "_post_backward_final_callback"): "FSDP backward",
    (_F1 + "_runtime_utils.py", "_prefetch_handle"): "FSDP prefetch",
    (_F1 + "fully_sharded_data_parallel.py", "__init__"): "FSDP init",
    (_F1 + "_init_utils.py", "_sync_module_params_and_buffers"): "FSDP init",
}


def _module_of(local: dict) -> str | None:
    """The module an FSDP2 parameter group shards, by its fully qualified name: `self` is the
    FSDPParamGroup, `_module_fqn` its module ("" for the root), set by FSDPState._init_fqns at lazy init."""
    fqn = getattr(local.get("self"), "_module_fqn", None)
    if not isinstance(fqn, str):
        return None
    return fqn or "the root module"


# FSDPParamGroup.unshard (forward, prefetch and backward all-gathers) and .post_backward (the reduce-scatter)
DETAILS = {(_F2 + "_fsdp_param_group.py", "unshard"): _module_of,
           (_F2 + "_fsdp_param_group.py", "post_backward"): _module_of}
