"""Startup hook, run by collcheck.pth in every Python process of the environment.

Cheap and inert unless COLLCHECK is set; never breaks the host process. It arms an
import hook so the patches go in right after torch.distributed.distributed_c10d is
executed (before anything binds its functions by name), and never in torchrun's
own agent process.
"""

import os
import sys

_TARGET = "torch.distributed.distributed_c10d"
_AGENT_MAINS = ("torchrun", os.path.join("torch", "distributed", "run.py"), os.path.join("torch", "distributed", "launch.py"))


def _is_launcher() -> bool:
    argv0 = (getattr(sys, "argv", None) or [""])[0]
    return os.path.basename(argv0) == "torchrun" or argv0.endswith(_AGENT_MAINS[1:])


def _arm(c10d) -> None:
    try:
        if _is_launcher():
            return
        from . import session

        session.enable(c10d=c10d)
        from . import use_simnccl

        if use_simnccl.wanted():
            use_simnccl.install(c10d)
    except Exception as exc:  # never break the training job
        sys.stderr.write(f"collcheck: recording disabled: {exc!r}\n")


class _Finder:
    """Meta path finder that runs `_arm` once the c10d module has executed."""

    def find_spec(self, name, path=None, target=None):
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def _exec(module):
            exec_module(module)
            _arm(module)

        try:
            spec.loader.exec_module = _exec
        except Exception:
            return spec
        return spec


def main() -> None:
    try:
        from ..base.settings import Settings, new_run_id

        settings = Settings.from_env()
        if not settings.enabled:
            return
        if not settings.run_id:
            # the outermost process (torchrun's agent, mp.spawn's parent) names the run
            os.environ["COLLCHECK_RUN_ID"] = new_run_id()
        if _TARGET in sys.modules:
            _arm(sys.modules[_TARGET])
        elif not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())
    except Exception as exc:
        sys.stderr.write(f"collcheck: startup hook failed: {exc!r}\n")
