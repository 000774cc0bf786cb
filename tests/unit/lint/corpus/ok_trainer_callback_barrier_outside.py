"""A Hugging Face Trainer (DDP on 2 gloo ranks, CPU): 4 steps of a tiny regression model, an
evaluation every 2 steps, and a callback whose on_evaluate writes the best evaluation loss on
world process zero only, then waits for everyone outside that branch.

shape: d (rank-0-only writing, the barrier outside the branch) — `if
state.is_world_process_zero: self.write(metrics)`, `dist.barrier()` after it.
truth: correct — every process waits. Exits 0 (no destroy_process_group: after a Trainer, it
leaves the ranks hanging at exit on this torch and transformers).
"""
import datetime
import json
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


class WriteBest(TrainerCallback):
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


def dataset(seed: int, n: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    return [{"x": torch.randn(8, generator=g), "labels": torch.randn(1, generator=g)} for _ in range(n)]


def main() -> None:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT_S))
    folder = os.path.join(os.environ.get("CORPUS_OUT") or tempfile.gettempdir(),
                          f"ok_trainer_callback-{os.environ.get('MASTER_PORT', '0')}")
    torch.manual_seed(0)
    args = TrainingArguments(
        output_dir=folder, per_device_train_batch_size=2, per_device_eval_batch_size=4, max_steps=4,
        eval_strategy="steps", eval_steps=2, learning_rate=0.01, use_cpu=True, ddp_backend="gloo",
        ddp_timeout=TIMEOUT_S, report_to="none", save_strategy="no", disable_tqdm=True,
        remove_unused_columns=False, seed=0)
    os.makedirs(folder, exist_ok=True)
    trainer = Trainer(model=Regressor(), args=args, train_dataset=dataset(dist.get_rank(), 16),
                      eval_dataset=dataset(100, 8), callbacks=[WriteBest(folder)])
    trainer.train()
    print(f"rank {dist.get_rank()}: trained {trainer.state.global_step} steps")


if __name__ == "__main__":
    main()
