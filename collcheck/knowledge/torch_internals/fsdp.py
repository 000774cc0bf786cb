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


def _flat_module_of(local: dict) -> str | None:
    """The module an FSDP1 unit wraps, by its fully qualified name from the root. `handle` is the
    unit's FlatParamHandle; its FlatParameter's `_fqns` name the original parameters relative to
    the wrapped module, and the root's `_exec_order_data.param_to_fqn` (shared by every unit at
    lazy init, _runtime_utils._share_state_and_init_handle_attrs) names them from the root: the
    module is what the second has in front of the first. The table holds the FlatParameter itself,
    or with use_orig_params=True the original parameters (`_params`)."""
    flat = local["handle"].flat_param
    by_param = local["state"]._exec_order_data.param_to_fqn
    full = by_param.get(flat) or by_param[flat._params[0]]
    inner = flat._fqns[0]
    if not full[0].endswith(inner):
        return None
    return full[0][:-len(inner)].rstrip(".") or "the root module"


DETAILS = {
    # FSDPParamGroup.unshard (forward, prefetch and backward all-gathers), .post_backward (reduce-scatter)
    (_F2 + "_fsdp_param_group.py", "unshard"): _module_of,
    (_F2 + "_fsdp_param_group.py", "post_backward"): _module_of,
    # FSDP1: _runtime_utils._unshard(state, handle, ...) -> handle.unshard() -> _all_gather_flat_param;
    # _reduce_grad(state, handle) -> reduce_scatter_tensor (and the HSDP all-reduce)
    (_F1 + "_runtime_utils.py", "_unshard"): _flat_module_of,
    (_F1 + "_runtime_utils.py", "_reduce_grad"): _flat_module_of,
}
