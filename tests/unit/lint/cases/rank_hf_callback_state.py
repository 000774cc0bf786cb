"""A transformers callback: `state.is_world_process_zero` (TrainerState's field) is true on the main process only."""
import torch.distributed as dist
from transformers import TrainerCallback


class SyncOnSave(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:  # expect: branch a
            print(f"saved at step {state.global_step}")
            dist.barrier()  # expect: call a
        return control
