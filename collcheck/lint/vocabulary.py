"""What the lint knows by name: the values that differ per rank, the calls that issue collectives,
and the calls that make a value the same on every rank again.

Names are matched after imports are resolved (`dist.barrier` -> `torch.distributed.barrier`), so
`import torch.distributed as dist`, `from torch.distributed import barrier` and the full path
all count. Framework methods come from the framework tables `collcheck diff` names chains with
(knowledge/frameworks): each entry's public call (`accelerator.gather_for_metrics(...)`) gives the
method and the receiver it is called on, and its fix is the fix the lint prints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from ..knowledge import fixes

_TD = "torch.distributed"

# calls whose value is this process's rank (resolved names), and methods of that name on anything
RANK_CALLS = frozenset({f"{_TD}.get_rank", f"{_TD}.get_node_local_rank", f"{_TD}.get_group_rank",
                        "deepspeed.comm.get_rank", "deepspeed.comm.get_local_rank",
                        "torch_xla.core.xla_model.get_ordinal", "torch_xla.runtime.global_ordinal"})
RANK_METHODS = frozenset({"get_rank", "get_local_rank", "is_world_process_zero", "is_master_ordinal",
                          "is_local_process_zero", "get_ordinal", "get_node_local_rank", "get_global_rank_of"})
# whether this rank belongs to a mesh: the ranks outside it skip its collectives, as they must
MEMBERSHIP = frozenset({"get_coordinate", "_is_current_rank_part_of_mesh", "is_current_rank_part_of_mesh"})
# attributes that differ per rank (accelerate, Lightning, transformers, DeepSpeed, and `.rank` itself)
RANK_ATTRS = frozenset({"rank", "local_rank", "global_rank", "node_rank", "world_rank", "group_rank",
                        "is_main_process", "is_local_main_process", "is_last_process", "process_index",
                        "local_process_index", "is_global_zero",
                        "is_world_process_zero", "is_local_process_zero"})  # (TrainerState's fields)
# attributes that are the rank number itself (a rank test over them can be run for a small world)
RANK_NUMBERS = frozenset({"rank", "global_rank", "local_rank", "group_rank", "world_rank", "node_rank"})
# per-rank only on transformers' TrainingArguments (`args.should_save`), not on its TrainerControl
ARGS_RANK_ATTRS = frozenset({"should_save", "should_log"})
ARGS_NAMES = frozenset({"args", "training_args", "train_args"})
# environment variables a launcher sets per process
RANK_ENV = frozenset({"RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "ROLE_RANK", "LOCAL_PROCESS_RANK",
                      "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "OMPI_COMM_WORLD_RANK",
                      "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK"})
# parameters that carry a rank in by their name (the first argument `mp.spawn` passes is one too)
RANK_PARAMS = frozenset({"rank", "local_rank", "global_rank", "node_rank", "world_rank", "my_rank", "rank_id",
                         "process_index", "local_process_index", "proc_rank", "gpu_rank"})
# decorators whose function body runs on some ranks only
RANK_ONLY_DECORATORS = frozenset({"rank_zero_only", "on_main_process", "on_local_main_process",
                                  "on_last_process", "on_process", "on_local_process", "rank_zero_experimental"})
SPAWNERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
                      "torch.multiprocessing.spawn.spawn"})

# per-rank data: tests of a local tensor's values
LOCAL_CALLS = frozenset({"isnan", "isinf", "isfinite", "isneginf", "isposinf"})
# functions whose parameters (all but self) hold this rank's batch or activations
STEP_FUNCTIONS = frozenset({"forward", "training_step", "validation_step", "test_step", "predict_step",
                            "compute_loss", "prediction_step", "train_step", "eval_step"})
# ...but not these: counters and options, the same on every rank
STEP_COUNTERS = frozenset({"self", "cls", "batch_idx", "dataloader_idx", "optimizer_idx", "step", "epoch",
                           "model", "return_outputs", "num_items_in_batch", "prediction_loss_only", "ignore_keys",
                           "hiddens", "config"})
# a loop over one of these yields this rank's data (its trip count is the data's length)
DATA_NAME = re.compile(r"(loader|batch|dataset|data|samples|examples|shard)", re.IGNORECASE)

# calls that make their result (or their first argument, in place) the same on every rank
UNIFORM_RESULT = frozenset({"torch.device", "torch.cuda.device", "torch.cuda.set_device", "isinstance", "hasattr",
                            "callable", "type", "id", "print"})
UNIFORM_METHODS = frozenset({"to", "cuda", "cpu", "device", "set_device"})
# what each rank's part of one tensor has alike (not its device: cuda:0 on one rank, cuda:1 on the next)
UNIFORM_PROPERTIES = frozenset({"dtype", "layout", "is_sparse", "is_quantized", "is_floating_point"})
UNIFORM_QUERIES = frozenset({"is_floating_point", "is_complex", "element_size"})
# functions that shard data evenly whatever rank they are given (accelerate's loaders)
EVEN_SHARDS = frozenset({"prepare_data_loader", "skip_first_batches", "DistributedSampler", "DistributedBatchSampler",
                         "BatchSamplerShard", "IterableDatasetShard", "split_dataset_by_node"})
# wrappers whose result iterates as their first argument does (progress bars, enumerate)
PASS_THROUGH = frozenset({"tqdm", "trange", "enumerate", "iter", "track", "progress_bar"})
# FSDP (1) methods and class methods that gather or scatter the sharded state
FSDP_METHODS = frozenset({"state_dict", "summon_full_params", "full_optim_state_dict", "optim_state_dict",
                          "shard_full_optim_state_dict", "scatter_full_optim_state_dict", "clip_grad_norm_"})
DEVICE_KEYWORDS = frozenset({"device", "map_location", "device_ids", "output_device", "device_id", "rank",
                             "src", "dst", "group_src", "group_dst", "process_index", "num_replicas"})

P2P = frozenset(f"{_TD}.{n}" for n in ("send", "recv", "isend", "irecv", "batch_isend_irecv", "P2POp",
                                        "send_object_list", "recv_object_list")) \
    | frozenset(f"deepspeed.comm.{n}" for n in ("send", "recv", "isend", "irecv"))

# collectives by resolved name: what they are called in a message
_OPS = ("all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "all_gather_object",
        "all_gather_coalesced", "reduce", "reduce_scatter", "reduce_scatter_tensor", "broadcast",
        "broadcast_object_list", "scatter", "scatter_object_list", "gather", "gather_object", "all_to_all",
        "all_to_all_single", "barrier", "monitored_barrier", "new_group", "new_subgroups",
        "new_subgroups_by_enumeration", "split_group")
_FUNCOL = ("all_reduce", "all_reduce_inplace", "all_reduce_coalesced", "all_gather_tensor",
           "all_gather_tensor_autograd", "all_gather_tensor_inplace", "all_gather_into_tensor_coalesced",
           "reduce_scatter_tensor", "reduce_scatter_tensor_autograd", "reduce_scatter_tensor_coalesced",
           "all_to_all_single", "all_to_all_single_autograd", "broadcast", "permute_tensor")
COLLECTIVES = {**{f"{_TD}.{n}": f"dist.{n}()" for n in _OPS},
               **{f"{_TD}.distributed_c10d.{n}": f"dist.{n}()" for n in _OPS},
               **{f"{_TD}._functional_collectives.{n}": f"funcol.{n}()" for n in _FUNCOL},
               **{f"{_TD}.nn.functional.{n}": f"torch.distributed.nn.functional.{n}()" for n in
                  ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_all_single", "broadcast",
                   "reduce", "gather", "scatter")},
               **{f"deepspeed.comm.{n}": f"deepspeed.comm.{n}()" for n in _OPS + ("inference_all_reduce",)},
               **{f"{_TD}.checkpoint.{n}": f"dcp.{n}()" for n in
                  ("save", "load", "async_save", "save_state_dict", "load_state_dict")},
               **{f"{_TD}.checkpoint.state_dict.{n}": f"{n}()" for n in
                  ("get_state_dict", "get_model_state_dict", "get_optimizer_state_dict", "set_state_dict",
                   "set_model_state_dict", "set_optimizer_state_dict")},
               **{f"{p}.{n}": f"{n}()" for p in (f"{_TD}.tensor", f"{_TD}._tensor") for n in
                  ("distribute_tensor", "distribute_module")},
               f"{_TD}.device_mesh.init_device_mesh": "init_device_mesh()",
               **{f"{_TD}.fsdp.FullyShardedDataParallel.{n}": f"FSDP.{n}()" for n in
                  ("summon_full_params", "full_optim_state_dict", "optim_state_dict", "shard_full_optim_state_dict",
                   "scatter_full_optim_state_dict", "clip_grad_norm_")},
               "deepspeed.initialize": "deepspeed.initialize()"}
# methods that issue collectives whatever they are called on (DTensor's, DeviceMesh's)
COLLECTIVE_METHODS = {"full_tensor": "DTensor.full_tensor()", "redistribute": "DTensor.redistribute()"}
# of the calls above, those that issue collectives only in some configurations: a DTensor's
# conversion communicates only from sharded or partial placements, the state-dict helpers gather
# only under FSDP or tensor parallelism (a finding under them is a warning, not an error)
SOMETIMES = frozenset({"DTensor.full_tensor()", "DTensor.redistribute()",
                       *(f"{n}()" for n in ("get_state_dict", "get_model_state_dict", "get_optimizer_state_dict",
                                            "set_state_dict", "set_model_state_dict", "set_optimizer_state_dict"))})
# calls whose result's shape follows the values of their (per-rank) input, and tensor factories
# whose shape is their size arguments
SHAPE_FROM_VALUES = frozenset({"bincount", "nonzero", "unique", "unique_consecutive", "masked_select", "argwhere"})
FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange"})
# collectives every rank must give a tensor of one shape (their first argument)
SAME_SHAPE = frozenset({"dist.all_reduce()", "dist.reduce()", "dist.broadcast()", "dist.all_gather_into_tensor()",
                        "dist.reduce_scatter_tensor()"})
# all_to_all_single's output split sizes: what the peers send this rank, not what it computed alone
RECEIVED_SPLITS = "output_split_sizes"
# collectives that fill their first argument with what the peers sent (exchanged: no longer this rank's alone)
EXCHANGES = frozenset({"all_to_all_single", "all_to_all"})
# collectives that leave the tensor they are given (first argument) the same on every rank
IN_PLACE_UNIFORM = frozenset({"all_reduce", "broadcast", "all_gather", "all_gather_object",
                              "broadcast_object_list", "all_gather_into_tensor", "reduce_scatter_tensor"})
IN_PLACE_KEYWORDS = frozenset({"tensor", "tensor_list", "object_list", "output_tensor", "output",
                               "output_tensor_list"})  # their first parameter's name
# calls that make the module they are given (or return) one whose forward and backward are collectives
WRAPPERS = {"torch.nn.parallel.DistributedDataParallel": "DDP",
            "torch.nn.parallel.distributed.DistributedDataParallel": "DDP",
            "torch.distributed.fsdp.FullyShardedDataParallel": "FSDP",
            "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel": "FSDP",
            "torch.distributed.fsdp.fully_shard": "FSDP2",
            "torch.distributed._composable.fsdp.fully_shard": "FSDP2",
            "torch.distributed._composable.replicate": "DDP"}
IN_PLACE_WRAPPERS = frozenset({"FSDP2"})  # fully_shard(model) wraps `model` itself
JOIN_CONTEXTS = frozenset({"join", "join_uneven_inputs", "Join", "torch.distributed.algorithms.join.Join",
                           "torch.distributed.algorithms.Join"})
# receivers by the class they were made from, for the framework methods below
FRAMEWORK_TYPES = {"accelerate.Accelerator": "accelerator", "accelerate.accelerator.Accelerator": "accelerator",
                   "accelerate.PartialState": "accelerator", "lightning.Fabric": "fabric",
                   "lightning.fabric.Fabric": "fabric", "lightning_fabric.Fabric": "fabric",
                   "lightning.Trainer": "trainer", "lightning.pytorch.Trainer": "trainer",
                   "pytorch_lightning.Trainer": "trainer"}


@dataclass(frozen=True)
class Api:
    """A call that issues collectives: how the message names it and the fix in its own terms."""

    name: str
    fix: str
    framework: str = "torch.distributed"
    needs_keyword: str | None = None  # issues collectives only with this keyword set (`sync_dist=True`)
    sometimes: bool = False  # issues collectives only in some configurations (placements, the wrapping)


_PUBLIC = re.compile(r"^(?:(?P<recv>[A-Za-z_][\w.]*)\.)?(?P<meth>[A-Za-z_]\w*)\((?P<args>.*)\)$")
# method names too common to match on any receiver: the receiver's name or type must say which
_NOT_CALLS = frozenset({"engine", "model", "save_pretrained"})  # a forward; a save only TP models make collective
_MODULES = frozenset({"deepspeed", "torch", "dist"})  # module functions: COLLECTIVES names them by their path
# method names no other library uses: matched on any receiver (all others need the receiver's name or type)
DISTINCTIVE = frozenset({"gather_for_metrics", "wait_for_everyone", "pad_across_processes", "check_trigger",
                         "reduce_boolean_decision", "manual_backward", "broadcast_object_list", "gather_object",
                         "synchronize_rng_states", "main_process_first", "all_gather", "all_reduce"})


@lru_cache(maxsize=1)
def framework_apis() -> dict[str, list[tuple[str | None, Api]]]:
    """method -> [(receiver hint: None for any, BARE, or the name the receiver must have; Api; the
    receiver the table names)], from every framework table's public calls."""
    from ..knowledge.frameworks.lookup import TABLES

    out: dict[str, list] = {}
    for table in TABLES:
        name = table.__name__.rpartition(".")[2]
        for value in table.ENTRIES.values():
            for e in value if isinstance(value, tuple) else (value,):
                m = _PUBLIC.match(e.user_api or "")
                if m is None or m["meth"] in _NOT_CALLS or m["meth"][0].isupper() or \
                        (m["recv"] or "").split(".")[0] in _MODULES:
                    continue  # a forward, a constructor (`ModelCheckpoint(...)`), a module's function
                recv = (m["recv"] or "").rpartition(".")[2] or None
                keyword = next((k.split("=")[0].strip() for k in m["args"].split(",") if "=True" in k), None)
                api = Api(e.user_api, e.fix, name, keyword)
                if m["meth"] in DISTINCTIVE or (recv == "self" and keyword):
                    hint = None  # `x.gather_for_metrics(...)`, `self.log(..., sync_dist=True)`
                elif recv is None:
                    hint = BARE  # a bare `gather(...)` is accelerate's only when imported from it (torch.gather)
                else:
                    hint = recv  # `engine.save_checkpoint(...)`, not `self.checkpoint_io.save_checkpoint(...)`
                entry = (hint, api, recv)
                if entry not in out.setdefault(m["meth"], []):
                    out[m["meth"]].append(entry)
    return out


BARE = "<function>"  # a table's module function: matched only when imported from that framework


def receiver_matches(hint: str | None, receiver_text: str, receiver_type: str | None) -> bool:
    """Whether `x.meth()` is the framework's: the receiver is of the hinted type, or named so
    (`self.accelerator`, `accelerator`, `trainer.strategy`)."""
    if hint is None:
        return True
    if hint == BARE:
        return False
    if hint == "self":
        return receiver_text == "self"
    last = receiver_text.rpartition(".")[2].lower()
    return receiver_type == hint or hint.lower() in last or (hint == "engine" and last in ("model_engine", "ds_engine"))


def collective_fix(name: str) -> str:
    return fixes.call_on_every_rank(name)
