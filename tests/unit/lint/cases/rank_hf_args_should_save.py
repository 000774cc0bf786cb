"""transformers' `args.should_save` is true on the main process only: a barrier under it hangs."""
import torch.distributed as dist


def save(trainer, args, output_dir: str) -> None:
    if args.should_save:  # expect: branch a
        trainer.model.save_pretrained(output_dir)
        dist.barrier()  # expect: call a
