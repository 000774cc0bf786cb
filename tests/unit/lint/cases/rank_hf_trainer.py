"""HF Trainer's `self.is_world_process_zero()`, `self.args.should_save` and `args.process_index` are rank-valued."""
import torch.distributed as dist
from transformers import Trainer, TrainingArguments


class SavingTrainer(Trainer):
    def save_extra(self, output_dir: str) -> None:
        if self.is_world_process_zero():  # expect: branch zero
            self.model.config.save_pretrained(output_dir)
            dist.barrier()  # expect: call zero
        if self.args.should_save:  # expect: branch should
            dist.barrier()  # expect: call should


def log_metrics(args: TrainingArguments, metrics: dict) -> None:
    if args.process_index == 0:  # expect: branch index
        print(metrics)
        dist.barrier()  # expect: call index
