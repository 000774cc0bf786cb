"""Hugging Face transformers 5.24.0 `Trainer`: where its collectives come from.

The Trainer's users write callbacks, datasets and `TrainingArguments`, never a collective, so
the words name the Trainer's step that issued it and the fixes name what makes ranks take
different steps (a callback stopping or saving on one rank, datasets of different lengths).
Each entry's `at` cites the line of transformers 5.24.0 that issues or leads to the collective.
The Trainer's gathers go through accelerate (accelerate.py); entries here outrank accelerate's
helpers (the evaluation loop's `gather_for_metrics` is the evaluation loop's).
"""

from __future__ import annotations

from .entry import CALL, HELPER, PURPOSE, Entry

DISTRIBUTIONS = ("transformers",)
VERSION = "5.24.0"
ALIASES: dict = {}

_T = "transformers/trainer.py"
_PT = "transformers/trainer_pt_utils.py"

_SAME_STEPS = ("run the same number of training steps on every rank (each rank's dataloader as long, "
               "the same `gradient_accumulation_steps`)")
_STOP_FIX = ("stop training on every rank at the same step: a callback that sets `control.should_training_stop` "
             "on one rank only (EarlyStoppingCallback on a per-rank metric) sends that rank here while the "
             "others still train; decide on metrics every rank shares (the evaluation loop gathers them)")
_SAVE_FIX = ("save on every rank: let `save_strategy` decide (not a callback setting `control.should_save` on one "
             "rank only); call `trainer.save_model()` on every rank (the Trainer writes on the main process itself)")
_EVAL_FIX = ("run `trainer.evaluate()`/`trainer.predict()` on every rank with datasets of the same length on every "
             "rank (the Trainer's sampler pads them; a custom dataloader must too)")

ENTRIES = {
    # trainer.py:3007 `losses = self.gather_function(losses.repeat(batch_size))`, :3011 inputs, :3021 logits,
    # :3025 labels (gather_function is accelerate's gather_for_metrics, :866); :3010/:3016/:3018 pad_across_processes
    (_T, "Trainer.evaluation_loop"): Entry(
        "transformers Trainer evaluation/prediction loop gather (each batch's losses, logits and labels)",
        _EVAL_FIX, None, CALL, (3007, 3010, 3011, 3016, 3018, 3021, 3025),
        ("gather_for_metrics", "gather", "pad_across_processes"), after_loop=True),
    # trainer.py:2350 `num_items_in_batch = self.accelerator.gather(num_items_in_batch.to(device)).sum()`
    (_T, "Trainer._get_num_items_in_batch"): Entry(
        "transformers Trainer `num_items_in_batch` gather (each step's token count, `average_tokens_across_devices`)",
        _SAME_STEPS, None, CALL, 2350),
    # trainer.py:2748 `self.state.num_input_tokens_seen += self.accelerator.gather(input_tokens).sum().item()`
    (_T, "Trainer._track_num_input_tokens"): Entry(
        "transformers Trainer input-token count gather (`include_num_input_tokens_seen`)", _SAME_STEPS, None, CALL, 2748),
    # trainer.py:2257 `tr_loss_scalar = nested_gather(tr_loss, ...)`; :2272 `self.store_flos()`
    (_T, "Trainer._maybe_log_save_evaluate"): (
        Entry("transformers Trainer training-loss gather for logging (`logging_steps`)", _SAME_STEPS, None, CALL,
              2257, ("nested_gather",)),
        Entry("transformers Trainer floating-point-operations count at logging (`store_flos`)", _SAME_STEPS, None,
              CALL, 2272, ("store_flos",)),
    ),
    # trainer.py:4217 `distributed_broadcast_scalars([self.current_flos], ...)` (an all-gather)
    (_T, "Trainer.store_flos"): Entry(
        "transformers Trainer floating-point-operations count (`store_flos`)", _SAME_STEPS, None, CALL, 4217),
    # trainer.py:2017 `self.store_flos()` once the loop ended
    (_T, "Trainer._finalize_training"): Entry(
        "transformers Trainer end-of-training floating-point-operations count (`store_flos`)", _STOP_FIX, None, CALL,
        2017, ("store_flos",), ends_training=True),
    # trainer.py:3373 `self.store_flos()`, :3388 `dist.barrier()`
    (_T, "Trainer._save_checkpoint"): Entry(
        "transformers Trainer checkpoint save (`save_strategy`)", _SAVE_FIX, None, PURPOSE, (3373, 3388)),
    # trainer.py:4107 / :4120 `state_dict = self.accelerator.get_state_dict(...)` (sharded models)
    (_T, "Trainer.save_model"): Entry(
        "transformers `trainer.save_model()`", _SAVE_FIX, "trainer.save_model()", PURPOSE, (4107, 4120)),
    # trainer.py:3753 `deepspeed_load_checkpoint(` (`load_best_model_at_end`)
    (_T, "Trainer._load_best_model"): Entry(
        "transformers Trainer best-model load (`load_best_model_at_end`)", "let every rank reach the end of "
        "training (the same steps and evaluations on every rank)", None, PURPOSE, 3753),
    # trainer.py:1811 `deepspeed_load_checkpoint(` (`resume_from_checkpoint`)
    (_T, "Trainer._prepare_for_training"): Entry(
        "transformers Trainer checkpoint resume (`resume_from_checkpoint`)", "pass the same "
        "`resume_from_checkpoint` on every rank", None, PURPOSE, 1811, ("deepspeed_load_checkpoint",)),
    # trainer.py:2126 `self.accelerator.backward(loss, **kwargs)`: DDP's gradient all-reduce
    (_T, "Trainer.training_step"): Entry(
        "transformers Trainer `training_step` backward (DDP's gradient all-reduce)", _SAME_STEPS, None, HELPER, 2126),
    # trainer.py:2656 `dist.broadcast(param.data, src=0)`
    (_T, "Trainer._sync_replicated_trainable_parameters"): Entry(
        "transformers Trainer broadcast of replicated trainable parameters (FSDP2 + adapters)",
        "call `trainer.train()` on every rank", None, CALL, 2656),
    # trainer.py:2650 `dist.all_reduce(param.grad, op=dist.ReduceOp.AVG)` (a post-accumulate-grad hook)
    (_T, "Trainer._sync_replicated_trainable_parameters.average_gradient"): Entry(
        "transformers Trainer gradient average of replicated trainable parameters", _SAME_STEPS, None, CALL, 2650),
    # trainer_pt_utils.py:207 `dist.all_gather(output_tensors, tensor)`
    (_PT, "distributed_concat"): Entry(
        "transformers `distributed_concat` (all-gather)", "call it on every rank", None, HELPER, 207),
    # trainer_pt_utils.py:233 `tensors = distributed_concat(tensors)`
    (_PT, "nested_gather"): Entry("transformers `nested_gather` (all-gather)", "call it on every rank", None, HELPER, 233),
    # trainer_pt_utils.py:290 `dist.all_gather(output_tensors, tensorized_scalar)`
    (_PT, "distributed_broadcast_scalars"): Entry(
        "transformers `distributed_broadcast_scalars` (all-gather of scalars)", "call it on every rank", None, HELPER, 290),
    # trainer_pt_utils.py:318 / :321 `dist.barrier()`
    (_PT, "torch_distributed_zero_first"): Entry(
        "transformers `torch_distributed_zero_first()` barrier (local rank 0 runs the block first)",
        "enter the block on every rank", None, CALL, (318, 321)),
    # training_args.py:2141 / :2150 `dist.barrier()`
    ("transformers/training_args.py", "TrainingArguments.main_process_first"): Entry(
        "transformers `args.main_process_first()` barrier (the main process runs the block first)",
        "enter `with training_args.main_process_first():` on every rank", "training_args.main_process_first()",
        CALL, (2141, 2150)),
    # integrations/deepspeed.py:537 `torch.distributed.broadcast(value, src=0)` (loading into a ZeRO-3 model)
    ("transformers/integrations/deepspeed.py", "_load_state_dict_into_zero3_model.load"): Entry(
        "transformers weight loading into a DeepSpeed ZeRO-3 model (rank 0's weights broadcast)",
        "call `from_pretrained(...)` on every rank", "from_pretrained(...)", CALL, 537),
    # integrations/deepspeed.py:692 `load_path, _ = deepspeed_engine.load_checkpoint(`
    ("transformers/integrations/deepspeed.py", "deepspeed_load_checkpoint"): Entry(
        "transformers DeepSpeed checkpoint load", "load on every rank", None, PURPOSE, 692),
    # distributed/utils.py:167 / :169 `torch.distributed.barrier(...)`
    ("transformers/distributed/utils.py", "_distributed_barrier"): Entry(
        "transformers distributed-checkpoint barrier", "save on every rank", None, HELPER, (167, 169)),
    # distributed/mixin.py:403 `_distributed_barrier()`
    ("transformers/distributed/mixin.py", "DistributedMixin.save_distributed_checkpoint"): Entry(
        "transformers distributed checkpoint save", "call `save_pretrained(...)` on every rank", "save_pretrained(...)",
        PURPOSE, 403),
}

NAMES = {
    (_T, "Trainer.train"): "trainer.train()",
    (_T, "Trainer.evaluate"): "trainer.evaluate()",
    (_T, "Trainer.predict"): "trainer.predict(...)",
    (_T, "Trainer._inner_training_loop"): None,
}
