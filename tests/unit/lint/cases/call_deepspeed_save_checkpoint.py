"""`engine.save_checkpoint(d)` is collective in DeepSpeed; `engine, *_ = deepspeed.initialize(...)` gives the engine."""
import deepspeed


def save(args, model):
    engine, *_ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
    if engine.global_rank == 0:  # expect: branch a
        engine.save_checkpoint(args.save_dir, tag="final")  # expect: call a
