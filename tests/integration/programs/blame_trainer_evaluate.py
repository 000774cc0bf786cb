"""A Hugging Face Trainer (DDP on 2 gloo ranks, CPU): 4 steps of a tiny regression model, an
evaluation every 2 steps, and a callback whose on_evaluate writes the best evaluation loss to a
file the processes read next, then waits for everyone (argv[1] picks the case, argv[2] is the
Trainer's output folder).

bug: the callback's barrier sits inside `if state.is_world_process_zero:` with the write it
waits for. World group: DDP's set-up (slots 0-2), steps 1-2 (3-6: each the gradient
all-reduce and, with find_unused_parameters, the unused-parameter map's), the evaluation's loss
all-gather (7). Then rank 0 takes the branch and issues the barrier at slot 8, an extra
collective, while rank 1 leaves on_evaluate and trains step 3: its gradient all-reduce at slot 8
(its innermost line of this program: trainer.train).

ok: the barrier is outside the branch: every process waits for the file.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
from transformers import Trainer, TrainerCallback, TrainingArguments


class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def forward(self, x, labels=None):
        return {"loss": torch.nn.functional.mse_loss(self.layer(x), labels)}


class WriteBest(TrainerCallback):
    """Keeps the best evaluation loss in a file every process reads after the evaluation."""

    def __init__(self, folder: str):
        self.path, self.best = os.path.join(folder, "best.json"), float("inf")

    def write(self, metrics: dict) -> None:
        self.best = min(self.best, metrics["eval_loss"])
        with open(self.path, "w") as f:
            json.dump({"best_eval_loss": self.best}, f)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if state.is_world_process_zero:
            self.write(metrics)
        dist.barrier()  # every process waits for the file


class WriteBestThenWait(WriteBest):
    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if state.is_world_process_zero:  # @cond
            self.write(metrics)
            dist.barrier()  # @barrier


def dataset(seed: int, n: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    return [{"x": torch.randn(8, generator=g), "labels": torch.randn(1, generator=g)} for _ in range(n)]


def main(case: str, folder: str) -> None:
    timeout = int(os.environ.get("SCENARIO_TIMEOUT_S", "6"))
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=folder, per_device_train_batch_size=2, per_device_eval_batch_size=4, max_steps=4,
        eval_strategy="steps", eval_steps=2, learning_rate=0.01, use_cpu=True, ddp_backend="gloo",
        ddp_timeout=timeout, report_to="none", save_strategy="no", disable_tqdm=True,
        remove_unused_columns=False, seed=0)
    callback = WriteBest(folder) if case == "ok" else WriteBestThenWait(folder)
    trainer = Trainer(model=Regressor(), args=args, train_dataset=dataset(dist.get_rank(), 16),
                      eval_dataset=dataset(100, 8), callbacks=[callback])
    trainer.train()  # @train


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="blame-trainer-"))
