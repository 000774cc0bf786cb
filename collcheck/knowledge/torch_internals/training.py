"""What else a training step runs through torch that communicates (torch 2.13): DDP's comm hooks,
FSDP1's gradient clipping, scaler and NO_SHARD reduce, ZeroRedundancyOptimizer, model averaging,
DTensor's RNG sync and loss_parallel, context parallel's ring attention, and
torch.distributed.checkpoint.state_dict's broadcasts. Each entry cites the torch line that issues
the collective (distributed/ relative to the torch package)."""

_HOOKS = "distributed/algorithms/ddp_comm_hooks/"
_FSDP1 = "distributed/fsdp/"
_ZERO = "distributed/optim/zero_redundancy_optimizer.py"
_CP = "distributed/tensor/experimental/_context_parallel/_attention.py"
_DSD = "distributed/_state_dict_utils.py"

ROLES = {
    # DDP comm hooks run by the C++ reducer as Python: the same role as its own bucket all-reduce
    (_HOOKS + "default_hooks.py", "_allreduce_fut"): "gradient bucket",  # :29 all_reduce (allreduce_hook)
    (_HOOKS + "default_hooks.py", "_compress_hook"): "gradient bucket",  # :90 all_reduce (fp16/bf16_compress_hook)
    (_HOOKS + "mixed_precision_hooks.py", "_reducer_allreduce_and_upcast_hook"): "gradient bucket",  # :46
    (_HOOKS + "powerSGD_hook.py", "powerSGD_hook"): "PowerSGD uncompressed bucket",  # :570
    (_HOOKS + "powerSGD_hook.py", "unpack_uncompressed_tensors_and_allreduce_ps"): "PowerSGD P",  # :585
    (_HOOKS + "powerSGD_hook.py", "compute_qs"): "PowerSGD Q",  # :607
    (_HOOKS + "powerSGD_hook.py", "batched_powerSGD_hook"): "PowerSGD P",  # :813
    (_HOOKS + "powerSGD_hook.py", "compute_q"): "PowerSGD Q",  # :832
    (_HOOKS + "quantization_hooks.py", "quantize_and_allgather"): "quantized gradient bucket",  # :95, :191
    # FSDP1: clip_grad_norm_ :1184/:1189 all_reduce of the norm; ShardedGradScaler.unscale_ :275/:281;
    # NO_SHARD gradients :940
    (_FSDP1 + "fully_sharded_data_parallel.py", "clip_grad_norm_"): "gradient norm",
    (_FSDP1 + "sharded_grad_scaler.py", "unscale_"): "found-inf flag",
    (_FSDP1 + "_runtime_utils.py", "_reduce_grad_no_shard"): "FSDP gradient reduce",
    # FSDP2 with TP/EP: a gradient's placements redistributed (_fsdp_param.py :958/:965)
    (_FSDP1 + "_fully_shard/_fsdp_param.py", "_get_grad_inner_tensor"): "FSDP2 gradient redistribute",
    # ZeroRedundancyOptimizer: each rank's updated shard broadcast (:787/:803), state consolidation (:104-116)
    (_ZERO, "_broadcast_params_from_rank"): "ZeRO parameter broadcast",
    (_ZERO, "_broadcast_object"): "ZeRO state consolidation",
    # PostLocalSGD / model averaging: algorithms/model_averaging/utils.py :44 all_reduce
    ("distributed/algorithms/model_averaging/utils.py", "average_parameters"): "model averaging",
    # DTensor: the RNG tracker broadcasts rank 0's state on the default group at the first random op
    # (_random.py :212); torch.equal on DTensors votes with an all_reduce MIN (_dispatch.py :521)
    ("distributed/tensor/_random.py", "__init__"): "DTensor RNG state sync",
    ("distributed/tensor/_dispatch.py", "_dispatch_fast_path_python_tail"): "DTensor torch.equal vote",
    # loss_parallel(): parallel/loss.py :209/:214 (max and sum of exp), :316 (NLL reduction)
    ("distributed/tensor/parallel/loss.py", "_log_softmax"): "loss_parallel softmax statistics",
    ("distributed/tensor/parallel/loss.py", "_nll_loss_forward"): "loss_parallel NLL reduction",
    # context parallel ring attention: KV (and dKV) rotation (:439, :534, :627), unshard (:1664)
    (_CP, "_templated_ring_attention"): "CP ring attention KV rotation",
    (_CP, "_templated_ring_attention_backward"): "CP ring attention backward rotation",
    (_CP, "context_parallel_unshard"): "CP unshard",
    # torch.distributed.checkpoint.state_dict (broadcast_from_rank0, full state dicts)
    (_DSD, "_broadcast_state_dict"): "state_dict broadcast from rank 0",  # :662 broadcast_object_list
    (_DSD, "_broadcast_tensors"): "state_dict broadcast from rank 0",  # :579/:581
    (_DSD, "_all_gather_sharded_tensor"): "state_dict all-gather",  # :64
    # DDP(delay_all_reduce_named_params=...): __init__ broadcasts the delayed parameters (:1223)
    ("nn/parallel/distributed.py", "_register_delay_all_reduce_hook"): "module state broadcast",
}
PHASES = {  # (a function that is a role of its own gets no phase: the innermost phase would be its own)
    (_HOOKS + "default_hooks.py", "allreduce_hook"): "DDP backward",
    (_HOOKS + "default_hooks.py", "fp16_compress_hook"): "DDP backward",
    (_HOOKS + "default_hooks.py", "bf16_compress_hook"): "DDP backward",
    (_HOOKS + "quantization_hooks.py", "quantization_pertensor_hook"): "DDP backward",
    (_HOOKS + "quantization_hooks.py", "quantization_perchannel_hook"): "DDP backward",
    (_ZERO, "step"): "ZeRO step",  # :1151 _sync_params
    (_ZERO, "consolidate_state_dict"): "ZeRO consolidate_state_dict",
    ("distributed/optim/post_localSGD_optimizer.py", "step"): "PostLocalSGD step",  # :105
    (_FSDP1 + "_state_dict_utils.py", "_pre_state_dict_hook"): "FSDP state_dict",
    (_FSDP1 + "_state_dict_utils.py", "_pre_load_state_dict_hook"): "FSDP load_state_dict",
    (_FSDP1 + "fully_sharded_data_parallel.py", "_optim_state_dict_impl"): "FSDP optim state_dict",
    (_FSDP1 + "fully_sharded_data_parallel.py", "_optim_state_dict_to_load_impl"): "FSDP optim state_dict load",
}
# the public state_dict calls (checkpoint/state_dict.py): their DTensor redistributions keep the placement
ENTRY_POINTS = {
    ("distributed/checkpoint/state_dict.py", "_get_model_state_dict"): "get_model_state_dict()",
    ("distributed/checkpoint/state_dict.py", "_get_optim_state_dict"): "get_optimizer_state_dict()",
    ("distributed/checkpoint/state_dict.py", "_load_model_state_dict"): "set_model_state_dict()",
    ("distributed/checkpoint/state_dict.py", "_load_optim_state_dict"): "set_optimizer_state_dict()",
}
