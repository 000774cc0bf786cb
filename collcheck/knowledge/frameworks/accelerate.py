"""Hugging Face accelerate 1.15.0: where its collectives come from.

Each entry's `at` cites the line of accelerate 1.15.0 that issues or leads to the collective,
quoted in the comment. The usual bug: a collective helper (`gather`, `wait_for_everyone`,
`save_state`) called inside `if accelerator.is_main_process:`; the fixes say so.
"""

from __future__ import annotations

from .entry import CALL, HELPER, PURPOSE, Entry

DISTRIBUTIONS = ("accelerate",)
VERSION = "1.15.0"
ALIASES: dict = {}

_ACC = "accelerate/accelerator.py"
_OPS = "accelerate/utils/operations.py"
_DL = "accelerate/data_loader.py"
_STATE = "accelerate/state.py"
_FSDP = "accelerate/utils/fsdp_utils.py"

_MAIN_ONLY = "outside `if accelerator.is_main_process:`"
_ITERATE = ("iterate the prepared dataloader on every process, as many times (each `for batch in dataloader` "
            "takes part in this)")


def _every(call: str) -> str:
    return f"call `{call}` on every process, {_MAIN_ONLY}"


ENTRIES = {
    # -- the Accelerator's collective helpers ------------------------------------------------------
    # accelerator.py:3107 `return gather(tensor)`
    (_ACC, "Accelerator.gather"): Entry(
        "accelerate `accelerator.gather(...)`", _every("accelerator.gather(...)"), "accelerator.gather(...)", HELPER, 3107),
    # accelerator.py:3151 `data = self.gather(input_data)` (then drops the last batch's duplicated samples)
    (_ACC, "Accelerator.gather_for_metrics"): Entry(
        "accelerate `gather_for_metrics()`", "call `accelerator.gather_for_metrics(...)` on every process for every "
        f"batch of the prepared dataloader, {_MAIN_ONLY}", "accelerator.gather_for_metrics(...)", CALL, 3151,
        after_loop=True),
    # accelerator.py:3217 `return reduce(tensor, reduction, scale)`
    (_ACC, "Accelerator.reduce"): Entry(
        "accelerate `accelerator.reduce(...)`", _every("accelerator.reduce(...)"), "accelerator.reduce(...)", HELPER, 3217),
    # accelerator.py:3252 `return pad_across_processes(tensor, dim=dim, ...)` (gathers every process's size)
    (_ACC, "Accelerator.pad_across_processes"): Entry(
        "accelerate `pad_across_processes()` (gathers each process's size)", _every("accelerator.pad_across_processes(...)"),
        "accelerator.pad_across_processes(...)", HELPER, 3252),
    # accelerator.py:3310 `wait_for_everyone()`
    (_ACC, "Accelerator.wait_for_everyone"): Entry(
        "accelerate `wait_for_everyone()`", _every("accelerator.wait_for_everyone()"), "accelerator.wait_for_everyone()",
        HELPER, 3310),
    # accelerator.py:2916 `flag_tensor = self.reduce(self.flag_tensor)`
    (_ACC, "Accelerator.check_trigger"): Entry(
        "accelerate `check_trigger()` (every process's `set_trigger()` flag summed)", "call "
        "`accelerator.check_trigger()` on every process at the same point of the loop (any process may "
        "`set_trigger()`)", "accelerator.check_trigger()", CALL, 2916),
    # accelerator.py:2861 `loss.backward(**kwargs)`: DDP's reducer all-reduces the gradients
    (_ACC, "Accelerator.backward"): Entry(
        "accelerate `accelerator.backward(loss)` (DDP's gradient all-reduce)", "call `accelerator.backward(loss)` on "
        "every process, as many times per step (the same number of batches on every process)",
        "accelerator.backward(loss)", HELPER, 2861),
    # accelerator.py:2060 `model = torch.nn.parallel.DistributedDataParallel(model, **kwargs)`
    (_ACC, "Accelerator.prepare_model"): Entry(
        "accelerate `prepare()` wrapping the model in DDP (parameter check, state broadcast)",
        "call `accelerator.prepare(model, ...)` on every process", "accelerator.prepare(...)", HELPER, 2060),
    # accelerator.py:3688 `self.wait_for_everyone()`; :3701 `save_fsdp_model(...)`; :3706 `model.save_checkpoint(`
    (_ACC, "Accelerator.save_state"): Entry(
        "accelerate `save_state()`", "call `accelerator.save_state(...)` on every process, "
        f"{_MAIN_ONLY} (accelerate writes on the main process itself)", "accelerator.save_state(...)", PURPOSE,
        (3688, 3701, 3706)),
    # accelerator.py:3849 `load_fsdp_model(...)`, :3854 `model.load_checkpoint(`, :3883 `load_fsdp_optimizer(`
    (_ACC, "Accelerator.load_state"): Entry(
        "accelerate `load_state()`", "call `accelerator.load_state(...)` on every process",
        "accelerator.load_state(...)", PURPOSE, (3849, 3854, 3883)),
    # accelerator.py:3530 `state_dict = self.get_state_dict(model)`
    (_ACC, "Accelerator.save_model"): Entry(
        "accelerate `save_model()` (gathers a sharded model's state)", _every("accelerator.save_model(...)"),
        "accelerator.save_model(...)", PURPOSE, 3530),
    # accelerator.py:4083 `model._zero3_consolidated_16bit_state_dict()`; :4100 `get_model_state_dict(model, ...)`
    (_ACC, "Accelerator.get_state_dict"): Entry(
        "accelerate `get_state_dict()` (gathers a sharded model's state)", _every("accelerator.get_state_dict(model)"),
        "accelerator.get_state_dict(model)", PURPOSE, (4081, 4083, 4100)),
    # accelerator.py:4301 `self.wait_for_everyone()` at the end of the profiled block
    (_ACC, "Accelerator.profile"): Entry(
        "accelerate `profile()` barrier", "enter `with accelerator.profile():` on every process",
        "accelerator.profile()", CALL, 4301),
    # -- state and utils ------------------------------------------------------------------------------
    # state.py:412 `torch.distributed.barrier(device_ids=...)` (and the plain barrier below it); the key also
    # matches AcceleratorState.wait_for_everyone, state.py:1122 `PartialState().wait_for_everyone()`
    (_STATE, "PartialState.wait_for_everyone"): Entry(
        "accelerate `wait_for_everyone()`", _every("accelerator.wait_for_everyone()"), "wait_for_everyone()", HELPER, 412),
    # state.py:418 / :423 `self.wait_for_everyone()` before and after the main process's turn
    (_STATE, "PartialState._goes_first"): Entry(
        "accelerate `main_process_first()` barrier (the main process runs the block first)", "enter `with "
        "accelerator.main_process_first():` on every process", "accelerator.main_process_first()", CALL, (418, 423)),
    # utils/other.py:372 `PartialState().wait_for_everyone()`
    ("accelerate/utils/other.py", "wait_for_everyone"): Entry(
        "accelerate `wait_for_everyone()`", _every("wait_for_everyone()"), "wait_for_everyone()", HELPER, 372),
    # operations.py:439 `return _gpu_gather(tensor)` (all_gather / all_gather_into_tensor, :355 / :324)
    (_OPS, "gather"): Entry("accelerate `gather()`", _every("gather(...)"), "gather(...)", HELPER, 439),
    # operations.py:521 `return _gpu_gather_object(object)` (all_gather_object, :500)
    (_OPS, "gather_object"): Entry(
        "accelerate `gather_object()`", _every("gather_object(...)"), "gather_object(...)", HELPER, 521),
    # operations.py:617 `return _gpu_broadcast(tensor, src=from_process)` (broadcast, :528)
    (_OPS, "broadcast"): Entry(
        "accelerate `broadcast()`", _every("broadcast(...)"), "broadcast(tensor, from_process=...)", HELPER, 617),
    # operations.py:695 `torch.distributed.broadcast_object_list(object_list, src=from_process)`
    (_OPS, "broadcast_object_list"): Entry(
        "accelerate `broadcast_object_list()`", _every("broadcast_object_list(...)"), "broadcast_object_list(...)",
        HELPER, 695),
    # operations.py:800 `return recursively_apply(` _pad_across_processes: gathers each size (:781)
    (_OPS, "pad_across_processes"): Entry(
        "accelerate `pad_across_processes()` (gathers each process's size)", _every("pad_across_processes(...)"),
        "pad_across_processes(...)", HELPER, 800),
    # operations.py:884 `return recursively_apply(` _reduce_across_processes: all_reduce (:879)
    (_OPS, "reduce"): Entry("accelerate `reduce()`", _every("reduce(...)"), "reduce(...)", HELPER, 884),
    # utils/random.py:133 / :136 `torch.distributed.broadcast(rng_state, 0)`
    ("accelerate/utils/random.py", "synchronize_rng_state"): Entry(
        "accelerate RNG-state synchronisation (rank 0's RNG state broadcast)", "call it on every process",
        "synchronize_rng_states(...)", HELPER, (133, 136)),
    # utils/random.py:165 `synchronize_rng_state(RNGType(rng_type), generator=generator)`
    ("accelerate/utils/random.py", "synchronize_rng_states"): Entry(
        "accelerate RNG-state synchronisation (rank 0's RNG state broadcast)", "call it on every process",
        "synchronize_rng_states(...)", HELPER, 165),
    # -- dataloaders ----------------------------------------------------------------------------------
    # data_loader.py:579 `synchronize_rng_states(self.rng_types, self.synchronized_generator)` at each `iter()`
    # (the key also matches XLA's MpDeviceLoaderWrapper.__iter__, :698, the same call)
    (_DL, "DataLoaderShard.__iter__"): Entry(
        "accelerate dataloader RNG synchronisation (each `iter(dataloader)` broadcasts rank 0's RNG state)",
        _ITERATE, "for batch in dataloader", CALL, 579, ("synchronize_rng_states",)),
    # data_loader.py:859 / :869 `broadcast_object_list(batch_info)` (batch size and stop flag from rank 0)
    (_DL, "DataLoaderDispatcher._fetch_batches"): Entry(
        "accelerate dataloader dispatch: batch-size and end-of-data broadcast (`dispatch_batches=True`)",
        _ITERATE + "; rank 0 reads each batch and sends it", "for batch in dataloader", CALL, (859, 869)),
    # data_loader.py:896 `batch = broadcast(batch, from_process=0)`
    (_DL, "DataLoaderDispatcher.__iter__"): Entry(
        "accelerate dataloader dispatch: batch broadcast (`dispatch_batches=True`)",
        _ITERATE + "; rank 0 reads each batch and sends it", "for batch in dataloader", CALL, 896, ("broadcast",)),
    # -- others -----------------------------------------------------------------------------------------
    # logging.py:79 `state.wait_for_everyone()` between processes (`in_order=True`)
    ("accelerate/logging.py", "MultiProcessAdapter.log"): Entry(
        "accelerate logger `in_order=True` (a barrier per process)", "log with `in_order=True` on every process",
        "logger.log(..., in_order=True)", CALL, 79),
    # local_sgd.py:104 `self.accelerator.wait_for_everyone()`, :107 `self.accelerator.reduce(param.data, ...)`
    ("accelerate/local_sgd.py", "LocalSGD._sync_and_avg_model_params"): Entry(
        "accelerate LocalSGD parameter averaging", "call `local_sgd.step()` on every process, as many times",
        "local_sgd.step()", CALL, (104, 107)),
    # fsdp_utils.py:180 `dist_cp.save(` (sharded state dict)
    (_FSDP, "save_fsdp_model"): Entry(
        "accelerate FSDP model save", _every("accelerator.save_state(...)"), None, PURPOSE, 180),
    # fsdp_utils.py:215 / :287 `accelerator.wait_for_everyone()`
    (_FSDP, "load_fsdp_model"): Entry(
        "accelerate FSDP model load", "call `accelerator.load_state(...)` on every process", None, PURPOSE, (215, 287)),
    # fsdp_utils.py:382 / :442 `accelerator.wait_for_everyone()`
    (_FSDP, "load_fsdp_optimizer"): Entry(
        "accelerate FSDP optimizer load", "call `accelerator.load_state(...)` on every process", None, PURPOSE, (382, 442)),
    # fsdp_utils.py:635 / :652 `dist.broadcast(full_param, src=0, ...)`
    (_FSDP, "fsdp2_load_full_state_dict"): Entry(
        "accelerate FSDP2 full-state-dict load (rank 0's weights broadcast)", "call `accelerator.prepare(model)` on "
        "every process", None, CALL, (635, 652)),
}

NAMES = {
    (_ACC, "Accelerator.prepare"): "accelerator.prepare(...)",
    (_ACC, "Accelerator.main_process_first"): "accelerator.main_process_first()",
    (_ACC, "Accelerator.local_main_process_first"): "accelerator.local_main_process_first()",
    (_STATE, "PartialState.main_process_first"): "state.main_process_first()",
}
