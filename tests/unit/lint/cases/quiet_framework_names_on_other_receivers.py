"""Framework method names on other objects: a profiler's `profile`, a checkpoint IO's `save_checkpoint`, TrainerControl's `should_save`."""
import torch
import torch.distributed as dist


def step(self, profiler, checkpoint_io, state, path):
    if dist.get_rank() == 0:
        with profiler.profile("step"):
            pass
        checkpoint_io.save_checkpoint(state, path)
    if self.control.should_save:
        self._save(path)


def _save(self, path):
    torch.save({}, path)
