"""Other torch code that issues collectives (torch 2.13): SyncBatchNorm
(torch/nn/modules/_functions.py), object collectives, and checkpointing's planning
(torch/distributed/checkpoint/utils.py)."""

_SYNC_BN = "nn/modules/_functions.py"
_DCP = "distributed/checkpoint/utils.py"

ROLES = {
    (_SYNC_BN, "forward"): "SyncBatchNorm statistics",  # SyncBatchNorm.forward: all_gather of mean/invstd
    (_SYNC_BN, "backward"): "SyncBatchNorm gradient",  # SyncBatchNorm.backward: all_reduce
    (_DCP, "gather_object"): "checkpoint planning",  # _DistWrapper: object collectives of DCP
    (_DCP, "all_gather_object"): "checkpoint planning",
    (_DCP, "scatter_object"): "checkpoint planning",
    (_DCP, "broadcast_object"): "checkpoint planning",
    (_DCP, "reduce_scatter"): "checkpoint planning",
    (_DCP, "all_reduce"): "checkpoint planning",
    (_DCP, "all_gather"): "checkpoint planning",
}
PHASES = {
    ("distributed/checkpoint/state_dict_saver.py", "save"): "checkpoint save",
    ("distributed/checkpoint/state_dict_saver.py", "async_save"): "checkpoint save",
    ("distributed/checkpoint/state_dict_loader.py", "load"): "checkpoint load",
}
