"""DeepSpeed's `engine.global_rank`: rank 0 alone calls `engine.save_checkpoint`, which every rank must call."""
import deepspeed
import torch


def finish(args, model):
    engine, optimizer, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
    torch.cuda.synchronize()
    if engine.global_rank == 0:  # expect: branch a
        print(f"saving to {args.output_dir}")
        engine.save_checkpoint(args.output_dir)  # expect: call a
