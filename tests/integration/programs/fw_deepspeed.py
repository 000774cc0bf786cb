"""A DeepSpeed engine (ZeRO stage 1, a torch SGD optimizer) on 2 gloo ranks, CPU: 4 steps, a
checkpoint after step 2 (argv[1] picks the case, argv[2] is the checkpoint folder).

save_rank0: the checkpoint is saved on rank 0 only (`if engine.global_rank == 0:`), though
DeepSpeed's save_checkpoint is collective: rank 0 enters its barrier while rank 1 goes on to
step 3.

ok: every rank saves.

The job's group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""

import datetime
import os
import sys
import tempfile

import deepspeed
import torch

CONFIG = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 1,
    "zero_optimization": {"stage": 1},
    "zero_allow_untested_optimizer": True,
    "steps_per_print": 1000,
}


def main(case: str, folder: str) -> None:
    timeout = datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    deepspeed.init_distributed(dist_backend="gloo", timeout=timeout)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.01),
                                           config=CONFIG)
    g = torch.Generator().manual_seed(engine.global_rank)
    for step in range(4):
        x, y = torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)
        loss = torch.nn.functional.mse_loss(engine(x), y)  # @forward
        engine.backward(loss)  # @backward
        engine.step()  # @step
        if step == 1:
            if case == "ok":
                engine.save_checkpoint(folder)  # @save_all
            elif engine.global_rank == 0:  # save from one rank, as with torch.save
                engine.save_checkpoint(folder)  # @save_rank0


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="fw-deepspeed-"))  # @main
