"""PyTorch Lightning 2.6.6 and Lightning Fabric: where their collectives come from.

Keys use the `lightning` package's layout; the standalone `pytorch_lightning` and
`lightning_fabric` packages ship the same files (`ALIASES` maps them). Each entry's `at` cites
the line of lightning 2.6.6 that issues or leads to the collective, quoted in the comment.
Lightning users never call a collective themselves: the words name what they wrote
(`self.log(..., sync_dist=True)`, a callback, `trainer.save_checkpoint`).
"""

from __future__ import annotations

from .entry import CALL, HELPER, PURPOSE, Entry

DISTRIBUTIONS = ("lightning", "pytorch_lightning")  # installed versions checked against VERSION by the tests
VERSION = "2.6.6"
ALIASES = {"pytorch_lightning/": "lightning/pytorch/", "lightning_fabric/": "lightning/fabric/"}

_L = "lightning/pytorch/"
_F = "lightning/fabric/"
_RESULT = _L + "trainer/connectors/logger_connector/result.py"
_CKPT = _L + "callbacks/model_checkpoint.py"
_FDIST = _F + "utilities/distributed.py"
_FABRIC = _F + "fabric.py"

_LOG_FIX = "call `self.log(..., sync_dist=True)` on every rank, or use `rank_zero_only=True` without `sync_dist`"
_LOG_API = "self.log(..., sync_dist=True)"
_SAVE_FIX = ("call `trainer.save_checkpoint(path)` on every rank, not inside `if trainer.is_global_zero:` "
             "(Lightning writes the file on rank 0 itself)")
_EVERY_RANK = "let every rank run the same `trainer.fit/validate/test/predict` calls"


def _strategy(file: str, cls: str, barrier: int, broadcast: int, reduce: int) -> dict:
    """A strategy's barrier, broadcast and reduce: the helpers every Lightning feature uses."""
    return {
        (file, f"{cls}.barrier"): Entry(
            "Lightning strategy barrier", "call `trainer.strategy.barrier()` on every rank, not inside "
            "`if trainer.is_global_zero:`", "trainer.strategy.barrier()", HELPER, barrier),
        (file, f"{cls}.broadcast"): Entry(
            "Lightning strategy broadcast", "call `trainer.strategy.broadcast(obj)` on every rank (only `src` "
            "provides the value)", "trainer.strategy.broadcast(obj)", HELPER, broadcast),
        (file, f"{cls}.reduce"): Entry(
            "Lightning strategy reduce", "call `trainer.strategy.reduce(tensor)` on every rank",
            "trainer.strategy.reduce(tensor)", HELPER, reduce),
    }


def _setup_barrier(cls: str, line: int) -> Entry:
    return Entry(f"Lightning barrier in `{cls}.setup`", _EVERY_RANK, None, CALL, line, ("barrier",))


ENTRIES = {
    # -- metrics: self.log(..., sync_dist=True) -------------------------------------------------------
    # core/module.py:531 `results.log(` (LightningModule.log; `sync_dist_fn=trainer.strategy.reduce`, :544)
    (_L + "core/module.py", "LightningModule.log"): Entry(
        "Lightning `self.log(..., sync_dist=True)` metric reduction (on step)", _LOG_FIX, _LOG_API, CALL, 531),
    # result.py:225 `self._forward_cache = self.meta.sync(value.clone())` (a value logged on step); `meta.sync` is
    # the strategy's `reduce` (a torchmetrics Metric logged as is syncs itself: torchmetrics.py)
    (_RESULT, "_ResultMetric.update"): Entry(
        "Lightning `self.log(..., sync_dist=True)` metric reduction (on step)", _LOG_FIX, _LOG_API, CALL, 225,
        ("reduce",)),
    # result.py:248 `value = self.meta.sync(self.value.clone())`, :250 the cumulated batch size
    (_RESULT, "_ResultMetric.compute"): Entry(
        "Lightning epoch-end reduction of the metrics logged with `self.log(..., sync_dist=True)`",
        "log each `sync_dist=True` metric on every rank (the same names, as many times per epoch), or use "
        "`rank_zero_only=True` without `sync_dist`", _LOG_API, CALL, (248, 250), ("reduce",), after_loop=True),
    # core/module.py:694 `return apply_to_collection(data, Tensor, all_gather, ...)`
    (_L + "core/module.py", "LightningModule.all_gather"): Entry(
        "Lightning `self.all_gather(...)`", "call `self.all_gather(...)` on every rank (not inside "
        "`if self.trainer.is_global_zero:`), with tensors of the same shape", "self.all_gather(...)", CALL, 694),
    # core/module.py:1137 `loss.backward(*args, **kwargs)`: DDP's reducer all-reduces the gradients
    (_L + "core/module.py", "LightningModule.backward"): Entry(
        "Lightning backward of the loss `training_step` returned (DDP's gradient all-reduce)",
        "return a loss from `training_step` on every rank: a rank that returns None skips its backward and the "
        "gradient all-reduce the others wait in", "training_step returning the loss", HELPER, 1137),
    # core/module.py:1118 `self.trainer.strategy.backward(loss, None, *args, **kwargs)`
    (_L + "core/module.py", "LightningModule.manual_backward"): Entry(
        "Lightning `self.manual_backward(loss)` (DDP's gradient all-reduce)",
        "call `self.manual_backward(loss)` on every rank, as many times per step", "self.manual_backward(loss)",
        HELPER, 1118),
    # strategies/strategy.py:641 `wrapper_output = wrapper_module(*args, **kwargs)`: DDP's forward
    (_L + "strategies/strategy.py", "_ForwardRedirection.__call__"): Entry(
        "Lightning step forward through the strategy's model wrapper (DDP/FSDP)",
        "run the same number of steps on every rank (each rank's dataloader as long)", None, HELPER, 641),
    # -- strategies -------------------------------------------------------------------------------------
    # ddp.py:303 `torch.distributed.barrier()`, :311 `broadcast_object_list(obj, src, ...)`, :367 `_sync_ddp_if_available`
    **_strategy(_L + "strategies/ddp.py", "DDPStrategy", 303, 311, 367),
    # fsdp.py:421 `torch.distributed.barrier()`, :429 `broadcast_object_list`, :452 `_sync_ddp_if_available`
    **_strategy(_L + "strategies/fsdp.py", "FSDPStrategy", 421, 429, 452),
    # model_parallel.py:219 barrier, :227 broadcast_object_list, :238 `_sync_ddp_if_available`
    **_strategy(_L + "strategies/model_parallel.py", "ModelParallelStrategy", 219, 227, 238),
    # parallel.py:92 `_all_gather_ddp_if_available(tensor, ...)`
    (_L + "strategies/parallel.py", "ParallelStrategy.all_gather"): Entry(
        "Lightning strategy all-gather", "call `trainer.strategy.all_gather(tensor)` on every rank",
        "trainer.strategy.all_gather(tensor)", HELPER, 92),
    # parallel.py:109 `decision = self.reduce(decision, reduce_op=ReduceOp.SUM)`
    (_L + "strategies/parallel.py", "ParallelStrategy.reduce_boolean_decision"): Entry(
        "Lightning `reduce_boolean_decision` (every rank votes on a flag)",
        "call `trainer.strategy.reduce_boolean_decision(flag)` on every rank",
        "trainer.strategy.reduce_boolean_decision(flag)", HELPER, 109),
    # ddp.py:196 `return DistributedDataParallel(module=model, ...)`: parameter check and state broadcast
    (_L + "strategies/ddp.py", "DDPStrategy._setup_model"): Entry(
        "Lightning DDP setup (wrapping the LightningModule in DistributedDataParallel)", _EVERY_RANK, None, HELPER, 196),
    # ddp.py:178 `_sync_module_states(self.model)` (validate/test/predict: no DDP wrapper)
    (_L + "strategies/ddp.py", "DDPStrategy.setup"): Entry(
        "Lightning module-state broadcast at setup (rank 0's weights)", _EVERY_RANK, None, HELPER, 178,
        ("_sync_module_states",)),
    # overrides/distributed.py:170 `torch_sync_module_states(`
    (_L + "overrides/distributed.py", "_sync_module_states"): Entry(
        "Lightning module-state broadcast at setup (rank 0's weights)", _EVERY_RANK, None, HELPER, 170),
    (_L + "strategies/fsdp.py", "FSDPStrategy.setup"): _setup_barrier("FSDPStrategy", 345),  # :345 `self.barrier()`
    (_L + "strategies/model_parallel.py", "ModelParallelStrategy.setup"): _setup_barrier("ModelParallelStrategy", 182),
    (_L + "strategies/deepspeed.py", "DeepSpeedStrategy.setup"): _setup_barrier("DeepSpeedStrategy", 374),
    # -- the trainer's own steps --------------------------------------------------------------------
    # training_epoch_loop.py:265 `torch.distributed.broadcast(sigterm_tensor, src=0)` every batch; :271 barrier
    (_L + "loops/training_epoch_loop.py", "_TrainingEpochLoop._broadcast_sigterm_tensor"): Entry(
        "Lightning SIGTERM-flag broadcast (each training batch, rank 0 says whether it got SIGTERM)",
        "run the same number of training batches on every rank (each rank's dataloader as long: a "
        "`DistributedSampler`, `drop_last=True` or `limit_train_batches`): every batch starts with this broadcast",
        None, CALL, (265, 271)),
    # signal_connector.py:118 `dist.broadcast(sigterm_tensor, src=0)` in rank 0's SIGTERM handler
    (_L + "trainer/connectors/signal_connector.py", "_SignalConnector._sigterm_notifier_fn"): Entry(
        "Lightning SIGTERM-flag broadcast from a SIGTERM handler", "send SIGTERM to every rank's process, or to "
        "none: the handler broadcasts a flag the other ranks must receive", None, CALL, 118),
    # fit_loop.py:239 `trainer.strategy.barrier("train_dataloader()")`
    (_L + "loops/fit_loop.py", "_FitLoop.setup_data"): Entry(
        "Lightning barrier after `train_dataloader()`", _EVERY_RANK, None, CALL, 239, ("barrier",)),
    # evaluation_loop.py:178 `trainer.strategy.barrier(f"{stage.dataloader_prefix}_dataloader()")`
    (_L + "loops/evaluation_loop.py", "_EvaluationLoop.setup_data"): Entry(
        "Lightning barrier after `val_dataloader()`/`test_dataloader()`", _EVERY_RANK, None, CALL, 178, ("barrier",)),
    # prediction_loop.py:141 `trainer.strategy.barrier("predict_dataloader()")`
    (_L + "loops/prediction_loop.py", "_PredictionLoop.setup_data"): Entry(
        "Lightning barrier after `predict_dataloader()`", _EVERY_RANK, None, CALL, 141, ("barrier",)),
    # utilities/data.py:104 `total_length = strategy.reduce(torch.tensor(local_length, ...), reduce_op="sum")`
    (_L + "utilities/data.py", "has_len_all_ranks"): Entry(
        "Lightning dataloader-length check (`has_len_all_ranks`)", "give every rank a dataloader of the same kind "
        "(with a length on every rank, or on none)", None, CALL, 104),
    # trainer.py:1112 `self.strategy.barrier("run-stage")`
    (_L + "trainer/trainer.py", "Trainer._run_stage"): Entry(
        "Lightning barrier before the run stage", _EVERY_RANK, None, CALL, 1112, ("barrier",)),
    # call.py:105 `trainer.strategy.barrier("pre_setup")`, :112 `("post_setup")`
    (_L + "trainer/call.py", "_call_setup_hook"): Entry(
        "Lightning barrier around the `setup()` hooks", _EVERY_RANK, None, CALL, (105, 112), ("barrier",)),
    # checkpoint_connector.py:231 `self.trainer.strategy.barrier("_CheckpointConnector.resume_end")`
    (_L + "trainer/connectors/checkpoint_connector.py", "_CheckpointConnector.resume_end"): Entry(
        "Lightning barrier after restoring a checkpoint (`ckpt_path=`)", _EVERY_RANK, None, CALL, 231),
    # data_connector.py:93/100 `with _InfiniteBarrier():` around `prepare_data()`
    (_L + "trainer/connectors/data_connector.py", "_DataConnector.prepare_data"): Entry(
        "Lightning `prepare_data()` barrier (one rank prepares, the others wait)", _EVERY_RANK, None, CALL, (93, 100)),
    # trainer.py:1331 `dirpath = self.strategy.broadcast(dirpath)`
    (_L + "trainer/trainer.py", "Trainer.log_dir"): Entry(
        "Lightning log-dir broadcast (`trainer.log_dir`: rank 0's logger directory)", "read `trainer.log_dir` on "
        "every rank, not inside `if trainer.is_global_zero:` (rank 0's value is broadcast)", "trainer.log_dir",
        CALL, 1331),
    # -- callbacks and checkpoints ----------------------------------------------------------------------
    # early_stopping.py:238 `should_stop = trainer.strategy.reduce_boolean_decision(should_stop, all=False)`
    (_L + "callbacks/early_stopping.py", "EarlyStopping._run_early_stopping_check"): Entry(
        "Lightning EarlyStopping stop decision (every rank votes)", "run EarlyStopping on every rank, on a metric "
        "logged on every rank with `self.log(monitor, ..., sync_dist=True)`", "EarlyStopping(monitor=...)", CALL,
        238, ("reduce_boolean_decision",)),
    # timer.py:201 `should_stop = trainer.strategy.broadcast(should_stop)`
    (_L + "callbacks/timer.py", "Timer._check_time_remaining"): Entry(
        "Lightning Timer stop decision (rank 0's broadcast)", "run the Timer callback on every rank",
        "Timer(duration=...)", CALL, 201),
    # model_checkpoint.py:325 `dirpath = trainer.strategy.broadcast(dirpath)`
    (_CKPT, "ModelCheckpoint.setup"): Entry(
        "Lightning ModelCheckpoint directory broadcast (rank 0's `dirpath`)", "give every rank the same callbacks "
        "(ModelCheckpoint on every rank)", "ModelCheckpoint(...)", CALL, 325),
    # model_checkpoint.py:440 `skip_time = trainer.strategy.broadcast(skip_time)`
    (_CKPT, "ModelCheckpoint.on_train_batch_end"): Entry(
        "Lightning ModelCheckpoint `train_time_interval` decision (rank 0's broadcast)", "give every rank the same "
        "callbacks and the same number of training batches", "ModelCheckpoint(train_time_interval=...)", CALL, 440,
        ("broadcast",)),
    # model_checkpoint.py:750 `trainer.strategy.reduce_boolean_decision(bool(should_update_best_and_save))`
    (_CKPT, "ModelCheckpoint.check_monitor_top_k"): Entry(
        "Lightning ModelCheckpoint top-k decision (every rank votes)", "log the monitored metric on every rank "
        "with `self.log(monitor, ..., sync_dist=True)`", "ModelCheckpoint(monitor=...)", CALL, 750),
    # model_checkpoint.py:1005 `return trainer.strategy.reduce_boolean_decision(local_decision, all=False)`
    (_CKPT, "ModelCheckpoint.file_exists"): Entry(
        "Lightning ModelCheckpoint file-exists check (every rank votes)", "let ModelCheckpoint run on every rank",
        "ModelCheckpoint(...)", CALL, 1005),
    # model_checkpoint.py:622 `trainer.strategy.barrier()` after linking `last.ckpt`
    (_CKPT, "ModelCheckpoint._link_checkpoint"): Entry(
        "Lightning ModelCheckpoint `save_last` link", "let ModelCheckpoint run on every rank",
        "ModelCheckpoint(save_last=True)", PURPOSE, 622),
    # model_checkpoint.py:600 `trainer.save_checkpoint(filepath, self.save_weights_only)`
    (_CKPT, "ModelCheckpoint._save_checkpoint"): Entry(
        "Lightning ModelCheckpoint save (`trainer.save_checkpoint`)", "let ModelCheckpoint run on every rank (do not "
        "save on rank 0 only: Lightning writes the file on rank 0 itself)", "ModelCheckpoint(...)", PURPOSE + 1, 600),
    # trainer.py:1465 `self.strategy.barrier("Trainer.save_checkpoint")` (after strategy.save_checkpoint, :1464)
    (_L + "trainer/trainer.py", "Trainer.save_checkpoint"): Entry(
        "Lightning `trainer.save_checkpoint()`", _SAVE_FIX, "trainer.save_checkpoint(...)", PURPOSE, 1465),
    # deepspeed.py:649 / fsdp.py:559 / model_parallel.py:308 `self.broadcast(filepath)` in save_checkpoint
    (_L + "strategies/deepspeed.py", "DeepSpeedStrategy.save_checkpoint"): Entry(
        "Lightning DeepSpeed checkpoint save", _SAVE_FIX, "trainer.save_checkpoint(...)", PURPOSE, 649),
    (_L + "strategies/fsdp.py", "FSDPStrategy.save_checkpoint"): Entry(
        "Lightning FSDP checkpoint save", _SAVE_FIX, "trainer.save_checkpoint(...)", PURPOSE, 559),
    (_L + "strategies/model_parallel.py", "ModelParallelStrategy.save_checkpoint"): Entry(
        "Lightning ModelParallel checkpoint save", _SAVE_FIX, "trainer.save_checkpoint(...)", PURPOSE, 308),
    # deepspeed.py:681 / fsdp.py:588 / model_parallel.py:334 `self.broadcast(checkpoint_path)` in load_checkpoint
    (_L + "strategies/deepspeed.py", "DeepSpeedStrategy.load_checkpoint"): Entry(
        "Lightning DeepSpeed checkpoint load", "pass the same `ckpt_path` on every rank", None, PURPOSE, 681),
    (_L + "strategies/fsdp.py", "FSDPStrategy.load_checkpoint"): Entry(
        "Lightning FSDP checkpoint load", "pass the same `ckpt_path` on every rank", None, PURPOSE, 588),
    (_L + "strategies/model_parallel.py", "ModelParallelStrategy.load_checkpoint"): Entry(
        "Lightning ModelParallel checkpoint load", "pass the same `ckpt_path` on every rank", None, PURPOSE, 334),
    # cli.py:276 `file_exists = trainer.strategy.broadcast(file_exists)`, :299 `already_saved`
    (_L + "cli.py", "SaveConfigCallback.setup"): Entry(
        "Lightning CLI config save (rank 0's decision broadcast)", _EVERY_RANK, None, CALL, (276, 299)),
    # tuner/lr_finder.py:242 `ckpt_path = trainer.strategy.broadcast(ckpt_path)`, :282 the results
    (_L + "tuner/lr_finder.py", "_lr_find"): Entry(
        "Lightning learning-rate finder (`Tuner.lr_find`)", "run `tuner.lr_find(...)` on every rank", None,
        PURPOSE, (242, 282)),
    # tuner/lr_finder.py:434 `trainer.should_stop = trainer.strategy.broadcast(trainer.should_stop)`
    (_L + "tuner/lr_finder.py", "_LRCallback.on_train_batch_end"): Entry(
        "Lightning learning-rate finder stop decision (rank 0's broadcast)", "run `tuner.lr_find(...)` on every rank",
        None, CALL, 434),
    # -- Fabric --------------------------------------------------------------------------------------------
    # fabric.py:638 `self._strategy.barrier(name=name)`
    (_FABRIC, "Fabric.barrier"): Entry("Lightning Fabric `fabric.barrier()`", "call `fabric.barrier()` on every "
                                       "rank, not inside `if fabric.is_global_zero:`", "fabric.barrier()", HELPER, 638),
    # fabric.py:655 `return self._strategy.broadcast(obj, src=src)`
    (_FABRIC, "Fabric.broadcast"): Entry("Lightning Fabric `fabric.broadcast(obj)`", "call `fabric.broadcast(obj)` "
                                         "on every rank", "fabric.broadcast(obj)", HELPER, 655),
    # fabric.py:679 `apply_to_collection(data, Tensor, self._strategy.all_gather, ...)`
    (_FABRIC, "Fabric.all_gather"): Entry("Lightning Fabric `fabric.all_gather(...)`", "call `fabric.all_gather(...)` "
                                          "on every rank", "fabric.all_gather(...)", HELPER, 679),
    # fabric.py:708 `apply_to_collection(data, Tensor, self._strategy.all_reduce, ...)`
    (_FABRIC, "Fabric.all_reduce"): Entry("Lightning Fabric `fabric.all_reduce(...)`", "call `fabric.all_reduce(...)` "
                                          "on every rank", "fabric.all_reduce(...)", HELPER, 708),
    # fabric.py:726 `with _InfiniteBarrier() as barrier:`, :731 `barrier()`
    (_FABRIC, "Fabric.rank_zero_first"): Entry(
        "Lightning Fabric `rank_zero_first()` barrier (rank 0 runs the block first)", "enter `with "
        "fabric.rank_zero_first():` on every rank", "fabric.rank_zero_first()", CALL, (726, 731)),
    # fabric.py:866 `self._strategy.save_checkpoint(...)`, :867 `self.barrier()`
    (_FABRIC, "Fabric.save"): Entry("Lightning Fabric `fabric.save()`", "call `fabric.save(path, state)` on every "
                                    "rank (Fabric writes on rank 0 itself)", "fabric.save(path, state)", PURPOSE, (866, 867)),
    # fabric.py:909 `self._strategy.load_checkpoint(`, :915 `self.barrier()`
    (_FABRIC, "Fabric.load"): Entry("Lightning Fabric `fabric.load()`", "call `fabric.load(path, state)` on every rank",
                                    "fabric.load(path, state)", PURPOSE, (909, 915)),
    (_FABRIC, "Fabric.load_raw"): Entry("Lightning Fabric `fabric.load_raw()`", "call `fabric.load_raw(...)` on every "
                                        "rank", "fabric.load_raw(...)", PURPOSE, 953),
    # fabric.py:523 `self._strategy.backward(tensor, module, ...)`: DDP's gradient all-reduce
    (_FABRIC, "Fabric.backward"): Entry("Lightning Fabric `fabric.backward(loss)` (DDP's gradient all-reduce)",
                                        "call `fabric.backward(loss)` on every rank, as many times",
                                        "fabric.backward(loss)", HELPER, 523),
    # fabric.py:282 `self._strategy.setup_module_and_optimizers(`: DistributedDataParallel(...)
    (_FABRIC, "Fabric.setup"): Entry("Lightning Fabric `fabric.setup()` (wrapping the model in DDP)",
                                     "call `fabric.setup(model, ...)` on every rank", "fabric.setup(model, ...)", HELPER, 282),
    # wrappers.py:136 `output = self._forward_module(*args, **kwargs)`: DDP's forward
    (_F + "wrappers.py", "_FabricModule.forward"): Entry(
        "Lightning Fabric forward through the DDP wrapper", "run the same number of steps on every rank",
        "model(batch)", HELPER, 136),
    # fabric strategies/ddp.py:165 barrier, :181 broadcast_object_list, :153 `_sync_ddp_if_available`
    (_F + "strategies/ddp.py", "DDPStrategy.barrier"): Entry("Lightning Fabric strategy barrier", "call "
                                                              "`fabric.barrier()` on every rank", None, HELPER, 165),
    (_F + "strategies/ddp.py", "DDPStrategy.broadcast"): Entry("Lightning Fabric strategy broadcast", "call "
                                                                "`fabric.broadcast(obj)` on every rank", None, HELPER, 181),
    (_F + "strategies/ddp.py", "DDPStrategy.all_reduce"): Entry("Lightning Fabric strategy all-reduce", "call "
                                                                 "`fabric.all_reduce(...)` on every rank", None, HELPER, 153),
    # fabric strategies/parallel.py:86 `_all_gather_ddp_if_available`, :103 `self.all_reduce(` of the decision
    (_F + "strategies/parallel.py", "ParallelStrategy.all_gather"): Entry(
        "Lightning strategy all-gather", "call it on every rank", None, HELPER, 86),
    (_F + "strategies/parallel.py", "ParallelStrategy.reduce_boolean_decision"): Entry(
        "Lightning `reduce_boolean_decision` (every rank votes on a flag)", "call it on every rank", None, HELPER, 103),
    # fabric utilities/distributed.py:213 `torch.distributed.barrier(group=group)`, :214 `all_reduce(result, ...)`
    (_FDIST, "_sync_ddp"): Entry("Lightning `_sync_ddp` (barrier, then all-reduce of a tensor)", "call the reduction "
                                 "on every rank", None, HELPER, (213, 214)),
    (_FDIST, "_sync_ddp_if_available"): Entry("Lightning `_sync_ddp` (barrier, then all-reduce of a tensor)",
                                              "call the reduction on every rank", None, HELPER, 178),
    # :247 `gathered_tensors = all_gather(tensor, group)` (torch.distributed.nn.functional.all_gather)
    (_FDIST, "_all_gather_ddp_if_available"): Entry("Lightning all-gather", "call the all-gather on every rank",
                                                    None, HELPER, 247),
    # :124 `torch.distributed.barrier(group=group)` before gathering tensors of uneven shapes
    (_FDIST, "_gather_all_tensors"): Entry("Lightning gather of tensors of uneven shapes", "call it on every rank",
                                           None, HELPER, 124),
    # :68 `rank_zero_path = strategy.broadcast(path)` ... :94 `reduce_boolean_decision(found, all=True)`
    (_FDIST, "is_shared_filesystem"): Entry("Lightning shared-filesystem check", "call it on every rank", None,
                                            CALL, (68, 94)),
    # :418 / :428 `self.barrier()` (a monitored barrier without a timeout)
    (_FDIST, "_InfiniteBarrier.__call__"): Entry("Lightning barrier without a timeout", "reach it on every rank",
                                                 None, HELPER, 418),
    (_FDIST, "_InfiniteBarrier.__exit__"): Entry("Lightning barrier without a timeout", "reach it on every rank",
                                                 None, HELPER, 428),
}

# frames a chain enters Lightning by, for folds ("Trainer.fit") and the user's call when no entry says it
NAMES = {
    (_L + "trainer/trainer.py", "Trainer.fit"): "trainer.fit(...)",
    (_L + "trainer/trainer.py", "Trainer.validate"): "trainer.validate(...)",
    (_L + "trainer/trainer.py", "Trainer.test"): "trainer.test(...)",
    (_L + "trainer/trainer.py", "Trainer.predict"): "trainer.predict(...)",
    (_FABRIC, "Fabric.launch"): "fabric.launch(...)",
    (_FABRIC, "Fabric.setup_dataloaders"): "fabric.setup_dataloaders(...)",
}
