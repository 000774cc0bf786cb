"""DeepSpeed 0.19.8: where its collectives come from, and what its process groups are for.

DeepSpeed issues every collective through `deepspeed.comm` (comm/comm.py, then the torch
backend in comm/torch.py), so those frames name the op only; the engine's and ZeRO's frames
above them say why. Each entry's `at` cites the line of DeepSpeed 0.19.8 that issues or leads
to the collective. `GROUP_ROLES` names a group by the function that created it
(utils/groups.py and the pipeline grid), for `group_role`.
"""

from __future__ import annotations

from .entry import ANY, CALL, HELPER, PURPOSE, WIRE, Entry

DISTRIBUTIONS = ("deepspeed",)
VERSION = "0.19.8"
ALIASES: dict = {}

_E = "deepspeed/runtime/engine.py"
_Z12 = "deepspeed/runtime/zero/stage_1_and_2.py"
_Z3 = "deepspeed/runtime/zero/stage3.py"
_PP = "deepspeed/runtime/zero/partition_parameters.py"
_COORD = "deepspeed/runtime/zero/partitioned_param_coordinator.py"
_GROUPS = "deepspeed/utils/groups.py"
_GRID = "deepspeed/runtime/pipe/topology.py"
_TP_CHECK = ("DeepSpeedEngine._configure_tensor_parallel_states.check_dataloader_inputs_same_across_ranks"
             ".broadcast_and_check")

_SAVE_FIX = ("call `engine.save_checkpoint(...)` on every rank, not inside `if rank == 0:` (each rank writes its own "
             "shard; DeepSpeed coordinates the files)")
_STEP_FIX = "call `engine(batch)`, `engine.backward(loss)` and `engine.step()` on every rank, as many times"
_ZERO3_FIX = ("run the same forward and backward on every rank (the same submodules, as many micro-batches): "
              "ZeRO-3 gathers each submodule's parameters from every rank")
_BACKWARD_FIX = "call `engine.backward(loss)` on every rank, as many times per step (as many micro-batches)"

# decorator frames between DeepSpeed's functions: never the frame an entry or a fold names
PLUMBING = frozenset(("log_wrapper", "wrapper", "wrapped_fn", "timed_op"))

ENTRIES = {
    # every function of deepspeed.comm: comm.py's `log_wrapper` calls the function, which calls the torch backend
    ("deepspeed/comm/comm.py", ANY): Entry(
        "`deepspeed.comm.{func}`", "call `deepspeed.comm.{func}` on every rank of the group", None, HELPER),
    ("deepspeed/comm/torch.py", ANY): Entry(
        "DeepSpeed torch backend `{func}`", "call it on every rank of the group", None, WIRE),
    # -- checkpoints ----------------------------------------------------------------------------------
    # engine.py:4900 `dist.barrier()`, :4912 `self._checkpoint_tag_validation(tag)`, :4954 the optimizer's
    # `checkpoint_event_epilogue()` (ZeRO-3 all-gather), :4964 `dist.barrier()`
    (_E, "DeepSpeedEngine.save_checkpoint"): Entry(
        "DeepSpeed `save_checkpoint()`", _SAVE_FIX, "engine.save_checkpoint(...)", PURPOSE, (4900, 4912, 4954, 4964)),
    # engine.py:4858 `dist.all_reduce(max_bhash, op=dist.ReduceOp.MAX)`, :4859 MIN: the tag compared across ranks
    (_E, "DeepSpeedEngine._checkpoint_tag_validation"): Entry(
        "DeepSpeed `save_checkpoint()` tag check (the tag compared across ranks)", "call `engine.save_checkpoint(...)` "
        "on every rank with the same `tag`", "engine.save_checkpoint(...)", CALL, (4858, 4859)),
    # engine.py:4982 `dist.barrier()`
    (_E, "DeepSpeedEngine._commit_decoupled_checkpoint"): Entry(
        "DeepSpeed decoupled checkpoint commit", _SAVE_FIX, "engine.save_checkpoint(...)", PURPOSE, 4982),
    # engine.py:4485 `self.optimizer.checkpoint_event_epilogue()` (ZeRO-3 all-gather after loading)
    (_E, "DeepSpeedEngine.load_checkpoint"): Entry(
        "DeepSpeed `load_checkpoint()`", "call `engine.load_checkpoint(...)` on every rank",
        "engine.load_checkpoint(...)", PURPOSE, 4485),
    # -- the engine ------------------------------------------------------------------------------------
    # __init__.py:569 `engine = DeepSpeedEngine(args=args, ...)`
    ("deepspeed/__init__.py", "initialize"): Entry(
        "DeepSpeed `deepspeed.initialize()` setup", "call `deepspeed.initialize(...)` on every rank with the same "
        "model and config", "deepspeed.initialize(...)", HELPER, 569),
    # engine.py:2054 / :2059 `dist.broadcast(p.data.view(torch.uint8), ...)`
    (_E, "DeepSpeedEngine._broadcast_model"): Entry(
        "DeepSpeed `initialize()` model broadcast (rank 0's weights)", "call `deepspeed.initialize(...)` on every "
        "rank with the same model", "deepspeed.initialize(...)", CALL, (2054, 2059)),
    # engine.py:970 / :978 `dist.broadcast_object_list(`, :988 `dist.all_reduce(equal_tensor, ...)`
    (_E, _TP_CHECK): Entry(
        "DeepSpeed tensor-parallel input check (the batch compared across the tensor-parallel group)",
        "feed every rank of a tensor-parallel group the same batches", None, CALL, (970, 978, 988)),
    # engine.py:3007 `loss = self.module(*inputs, **kwargs)` (ZeRO-3's hooks gather parameters)
    (_E, "DeepSpeedEngine.forward"): Entry("DeepSpeed `engine(batch)` forward", _STEP_FIX, "engine(batch)", HELPER, 3007),
    # engine.py:3428 `loss.backward(...)`, :3431 `self._backward_epilogue()` (gradient reduction)
    (_E, "DeepSpeedEngine.backward"): Entry(
        "DeepSpeed `engine.backward(loss)`", _BACKWARD_FIX, "engine.backward(loss)", HELPER, (3428, 3431)),
    # engine.py:3615 `self._take_model_step(lr_kwargs)`
    (_E, "DeepSpeedEngine.step"): Entry("DeepSpeed `engine.step()`", _STEP_FIX, "engine.step()", HELPER, 3615),
    # engine.py:3095 `self.buffered_allreduce_fallback(grads=grads, ...)` (no ZeRO: :3811 `dist.all_reduce(`)
    (_E, "DeepSpeedEngine.allreduce_gradients"): Entry(
        "DeepSpeed engine gradient all-reduce (data parallel, `engine.backward`)", _BACKWARD_FIX,
        "engine.backward(loss)", CALL, 3095, ("buffered_allreduce_fallback",)),
    # engine.py:4005 `dist.all_gather(tensor_list, value, group=dp_group)`, :3995 sparse gradients
    (_E, "DeepSpeedEngine.all_gather_scalar"): Entry(
        "DeepSpeed engine all-gather of a scalar", _BACKWARD_FIX, None, HELPER, 4005),
    (_E, "DeepSpeedEngine.sparse_all_gather"): Entry(
        "DeepSpeed sparse-gradient all-gather", _BACKWARD_FIX, "engine.backward(loss)", CALL, 3995),
    # runtime/utils.py:418 `dist.all_reduce(scaled_norm_tensor, group=pg)`
    ("deepspeed/runtime/utils.py", "clip_grad_norm_"): Entry(
        "DeepSpeed gradient-clipping norm all-reduce (`engine.step`)", _STEP_FIX, "engine.step()", CALL, 418),
    # runtime/utils.py:1022 `return all_gather_into_tensor_dp_groups(...)` (:1016 all_gather_into_tensor)
    ("deepspeed/runtime/utils.py", "all_gather_dp_groups"): Entry(
        "DeepSpeed ZeRO-1/2 all-gather of the updated parameters (`engine.step`)", _STEP_FIX, "engine.step()", CALL, 1022),
    # -- ZeRO stages 1 and 2 ---------------------------------------------------------------------------------
    # stage_1_and_2.py:2229 `self.average_tensor(...)` -> allreduce_bucket :2384 `dist.all_reduce(`
    (_Z12, "DeepSpeedZeroOptimizer.reduce_ipg_grads"): Entry(
        "DeepSpeed ZeRO-1/2 gradient reduction (`engine.backward`)", _BACKWARD_FIX, "engine.backward(loss)", CALL, 2229),
    # stage_1_and_2.py:2693 `dist.all_reduce(total_norm, op=dist.ReduceOp.SUM, group=self.dp_process_group)`
    (_Z12, "DeepSpeedZeroOptimizer.get_grad_norm_direct"): Entry(
        "DeepSpeed ZeRO-1/2 gradient-norm all-reduce (`engine.step`)", _STEP_FIX, "engine.step()", CALL, 2693),
    # -- ZeRO stage 3 -----------------------------------------------------------------------------------------
    # partitioned_param_coordinator.py:344 `self._fetch_sub_module_impl(...)` -> :609 `all_gather_coalesced(`
    (_COORD, "PartitionedParameterCoordinator.fetch_sub_module"): Entry(
        "DeepSpeed ZeRO-3 parameter all-gather for a submodule (forward/backward)", _ZERO3_FIX, None, CALL, 344),
    # partitioned_param_coordinator.py:260 `assert_ints_same_as_other_ranks([m.ds_id for m in ...])`
    (_COORD, "PartitionedParameterCoordinator.reset_step"): Entry(
        "DeepSpeed ZeRO-3 trace check (the step's submodule order compared with rank 0's)", _ZERO3_FIX, None, CALL, 260),
    # stage3.py:1678 `self.__avg_scatter_grads(...)` -> :1931 `reduce_scatter_coalesced(`
    (_Z3, "DeepSpeedZeroOptimizer_Stage3.__reduce_and_partition_ipg_grads"): Entry(
        "DeepSpeed ZeRO-3 gradient reduce-scatter (`engine.backward`)", _BACKWARD_FIX, "engine.backward(loss)", CALL, 1678),
    # stage3.py:2469 `dist.all_reduce(total_norm_cuda, op=dist.ReduceOp.SUM, group=process_group)`
    (_Z3, "DeepSpeedZeroOptimizer_Stage3.get_grad_norm_direct"): Entry(
        "DeepSpeed ZeRO-3 gradient-norm all-reduce (`engine.step`)", _STEP_FIX, "engine.step()", CALL, 2469),
    # stage3.py:2841 `self.persistent_parameters[0].all_gather(self.persistent_parameters)`
    (_Z3, "DeepSpeedZeroOptimizer_Stage3._post_step"): Entry(
        "DeepSpeed ZeRO-3 all-gather of the persistent parameters after the step (`engine.step`)", _STEP_FIX,
        "engine.step()", CALL, 2841),
    # stage3.py:443 / :499 / :519: partitioning barriers (:914, :765) and the first all-gather (:1504)
    (_Z3, "DeepSpeedZeroOptimizer_Stage3.__init__"): Entry(
        "DeepSpeed ZeRO-3 optimizer setup (`deepspeed.initialize`)", "call `deepspeed.initialize(...)` on every rank",
        "deepspeed.initialize(...)", CALL, (443, 499, 519)),
    # partition_parameters.py:1204 `dist.broadcast(param.data.view(torch.uint8), 0, partition_group)`
    (_PP, "Init._zero_init_param"): Entry(
        "DeepSpeed ZeRO-3 parameter broadcast at partitioning (rank 0's values)", "partition the same model on every "
        "rank (`zero.Init` / `deepspeed.initialize`)", None, CALL, 1204),
    # partition_parameters.py:1327 `return self._all_gather(param_list, ...)` (:2073 `dist.all_gather_into_tensor(`)
    (_PP, "Init._convert_to_deepspeed_param.all_gather"): Entry(
        "DeepSpeed ZeRO-3 parameter all-gather", _ZERO3_FIX, None, HELPER, 1327),
    # partition_parameters.py:1601 `return _all_gather_coalesced(params, ...)`
    (_PP, "Init._convert_to_deepspeed_param.all_gather_coalesced"): Entry(
        "DeepSpeed ZeRO-3 parameter all-gather", _ZERO3_FIX, None, HELPER, 1601),
    # zero/utils.py:122 / :123: rank 0's list length and values broadcast, compared on each rank
    ("deepspeed/runtime/zero/utils.py", "assert_ints_same_as_other_ranks"): Entry(
        "DeepSpeed check that every rank holds rank 0's values", "reach it on every rank", None, HELPER, (122, 123)),
    # comm/coalesced_collectives.py:128 `_torch_reduce_scatter_fn(` (`dist.reduce_scatter_fn`)
    ("deepspeed/runtime/comm/coalesced_collectives.py", "reduce_scatter_coalesced"): Entry(
        "DeepSpeed coalesced reduce-scatter", "call it on every rank of the group", None, HELPER, 128),
}

NAMES = {
    (_E, "DeepSpeedEngine.__init__"): "deepspeed.initialize(...)",
    ("deepspeed/runtime/pipe/engine.py", "PipelineEngine.train_batch"): "engine.train_batch()",
}

# -- process groups by role: (file, function) -> role, or ((line, role), ..., default) ----------------------
_DP, _MP, _EP, _EDP = ("DeepSpeed data-parallel group", "DeepSpeed model-parallel group",
                       "DeepSpeed expert-parallel group", "DeepSpeed expert-data-parallel group")
GROUP_ROLES = {
    # groups.py:181 `group = dist.new_group(ranks)` (data parallel), :188 (tensor parallel)
    (_GROUPS, "_init_tp_groups_with_new_group"): ((181, _DP), (188, "DeepSpeed tensor-parallel group"),
                                                   "DeepSpeed tensor- or data-parallel group"),
    # groups.py:356 (data parallel), :363 (model parallel)
    (_GROUPS, "_create_model_parallel"): ((356, _DP), (363, _MP), "DeepSpeed model- or data-parallel group"),
    # groups.py:439 / :531 (expert data parallel), :454 / :464 / :524 (expert parallel)
    (_GROUPS, "_create_expert_and_data_parallel"): ((439, _EDP), (454, _EP), (464, _EP), (524, _EP), (531, _EDP),
                                                     "DeepSpeed expert- or expert-data-parallel group"),
    # groups.py:652 (expert parallel), :658 (expert data parallel)
    (_GROUPS, "_create_expert_data_and_model_parallel"): ((652, _EP), (658, _EDP),
                                                          "DeepSpeed expert- or expert-data-parallel group"),
    # groups.py:734 `_WORLD_GROUP = dist.new_group(ranks=range(dist.get_world_size()))`: the data-parallel group
    # when no model parallelism is configured (`_get_data_parallel_group`, :780)
    (_GROUPS, "_clone_world_group"): _DP + " (a copy of the world group)",
    # groups.py:748-763 `_ALL_TO_ALL_GROUP[...] = dist.new_group(...)`
    (_GROUPS, "_get_local_all_to_all_group"): "DeepSpeed all-to-all group",
    # groups.py:950 `group = dist.new_group(ranks)` (ZeRO++ hpZ secondary partition)
    (_GROUPS, "_create_zero_param_parallel_group"): "DeepSpeed ZeRO++ parameter-partition group",
    # zero/utils.py:35 `group = dist.new_group(ranks)`
    ("deepspeed/runtime/zero/utils.py", "_initialize_parameter_parallel_groups"): "DeepSpeed ZeRO parameter-parallel group",
    # sequence_parallel/parallel_state_sp.py:53 (sequence parallel), :63 (sequence data parallel)
    ("deepspeed/runtime/sequence_parallel/parallel_state_sp.py", "initialize_sequence_parallel"): (
        (53, "DeepSpeed sequence-parallel group"), (63, "DeepSpeed sequence-data-parallel group"),
        "DeepSpeed sequence-parallel group"),
    # pipe/topology.py:309 (a data index's model group), :321 (data parallel), :339 (pipeline), :353 / :362 (slicing)
    (_GRID, "PipelineParallelGrid.__init__"): (
        (309, "DeepSpeed pipeline model group"), (321, _DP), (339, "DeepSpeed pipeline-parallel group"),
        (353, "DeepSpeed tensor-slicing group"), (362, "DeepSpeed tensor-slicing group"), "DeepSpeed pipeline-grid group"),
    # pipe/p2p.py:34 `_groups = [dist.new_group(ranks=group) for group in _grid.p2p_groups]`
    ("deepspeed/runtime/pipe/p2p.py", "init_process_groups"): "DeepSpeed pipeline send/recv group",
    # pipe/module.py:163 (world), :512 (tied weights)
    ("deepspeed/runtime/pipe/module.py", "PipelineModule.__init__"): "DeepSpeed pipeline world group",
    ("deepspeed/runtime/pipe/module.py", "PipelineModule._index_tied_modules"): "DeepSpeed tied-weights group",
    # comm/torch.py:282 `torch.distributed.init_process_group(backend, **kwargs)`
    ("deepspeed/comm/torch.py", "TorchBackend.init_process_group"): "DeepSpeed world group (`deepspeed.init_distributed`)",
}
