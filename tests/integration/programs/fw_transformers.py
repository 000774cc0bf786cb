"""A Hugging Face Trainer (DDP on 2 gloo ranks, CPU) with a home-made early-stopping callback: 6
steps of a tiny regression model that returns {"loss": ...} (argv[1] picks the case, argv[2] is
the Trainer's output folder).

early_stop: the callback stops training once the training loss reaches its target, reading the
loss of this rank's own last batch (never reduced across ranks). Rank 1's shard is all zeros,
so its loss is 0 from the first step: after the 2-step warm-up it sets
control.should_training_stop and leaves the training loop for the end of training (the
floating-point-operations count, store_flos: an all-gather of one float32), while rank 0 goes on
to step 3 (the batch's label count, num_items_in_batch: an all-gather of one int64).

ok: the same run without the callback.

The job's group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""

import datetime
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from transformers import Trainer, TrainerCallback, TrainingArguments

SAMPLES = 24  # per rank's dataset: 6 steps of 2 per rank


class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1, bias=False)
        self.last_loss = None  # this rank's loss of its last batch

    def forward(self, x, labels, num_items_in_batch=None, **kwargs):
        """Accepts the loss kwargs, as Hugging Face models do: the Trainer then counts the batch's
        labels across ranks every step (an all-gather) and passes the total."""
        errors = (self.layer(x) - labels).square()
        self.last_loss = errors.mean().item()
        total = num_items_in_batch if num_items_in_batch is not None else errors.numel()
        return {"loss": errors.sum() / total}


class StopAtTargetLoss(TrainerCallback):
    """Early stopping: stop once the training loss is at the target (after a warm-up)."""

    def __init__(self, target: float = 1e-6, warmup: int = 2):
        self.target, self.warmup = target, warmup

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step >= self.warmup and model.last_loss <= self.target:  # this rank's batch only
            control.should_training_stop = True  # @should_stop


def dataset(rank: int) -> list[dict]:
    """This rank's own data (rank 1's all zeros)."""
    g = torch.Generator().manual_seed(rank)
    scale = 0.0 if rank == 1 else 1.0
    return [{"x": scale * torch.randn(8, generator=g), "labels": scale * torch.randn(1, generator=g)}
            for _ in range(SAMPLES)]


def main(case: str, folder: str) -> None:
    timeout = int(os.environ.get("SCENARIO_TIMEOUT_S", "6"))
    # with use_cpu, transformers 5 does not pass ddp_timeout to the process group it creates: make
    # it here (accelerate then uses it)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    rank = dist.get_rank()
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=folder, per_device_train_batch_size=2, num_train_epochs=1,
        learning_rate=0.01, use_cpu=True, ddp_backend="gloo", ddp_timeout=timeout,
        report_to="none", save_strategy="no", disable_tqdm=True, remove_unused_columns=False, seed=0)
    callbacks = [StopAtTargetLoss()] if case == "early_stop" else []
    trainer = Trainer(model=Regressor(), args=args, train_dataset=dataset(rank), callbacks=callbacks)
    trainer.train()  # @train


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="fw-transformers-"))  # @main
