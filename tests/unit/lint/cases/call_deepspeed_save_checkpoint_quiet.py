"""The twin of call_deepspeed_save_checkpoint: every rank saves (DeepSpeed writes each rank's part), rank 0 logs."""
import deepspeed


def save(args, model):
    engine, *_ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
    engine.save_checkpoint(args.save_dir, tag="final")
    if engine.global_rank == 0:
        print(f"saved to {args.save_dir}")
