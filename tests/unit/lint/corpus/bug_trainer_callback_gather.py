"""A Hugging Face Trainer (DDP on 2 gloo ranks, CPU): 4 steps, an evaluation every 2 steps, and a
callback whose on_evaluate collects every process's metrics with all_gather_object, but only
on world process zero (which writes the report).

shape: rank-dependent branch (the Trainer state's is_world_process_zero) in a callback around a
collective — `if state.is_world_process_zero: dist.all_gather_object(...)`.
truth: buggy — rank 0's gather meets rank 1's next training step's gradient all_reduce.
expected lint target: bug_trainer_callback_gather.py:35 (the call, marker @bug) under the condition
at line 33 (marker @cond).
"""
import datetime
import os
import tempfile

import torch
import torch.distributed as dist
from transformers import Trainer, TrainerCallback, TrainingArguments

TIMEOUT_S = int(float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def forward(self, x, labels=None):
        return {"loss": torch.nn.functional.mse_loss(self.layer(x), labels)}


class Report(TrainerCallback):
    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if state.is_world_process_zero:  # @cond
            everyone = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, metrics)  # @bug
            print(f"step {state.global_step}: {everyone}")


def dataset(seed: int, n: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    return [{"x": torch.randn(8, generator=g), "labels": torch.randn(1, generator=g)} for _ in range(n)]


def main() -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    folder = os.path.join(os.environ.get("CORPUS_OUT") or tempfile.gettempdir(),
                          f"bug_trainer_callback-{os.environ.get('MASTER_PORT', '0')}")
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=folder, per_device_train_batch_size=2, per_device_eval_batch_size=4, max_steps=4,
        eval_strategy="steps", eval_steps=2, learning_rate=0.01, use_cpu=True, ddp_backend="gloo",
        ddp_timeout=TIMEOUT_S, report_to="none", save_strategy="no", disable_tqdm=True,
        remove_unused_columns=False, seed=0)
    trainer = Trainer(model=Regressor(), args=args, train_dataset=dataset(dist.get_rank(), 16),
                      eval_dataset=dataset(100, 8), callbacks=[Report()])
    trainer.train()


if __name__ == "__main__":
    main()
