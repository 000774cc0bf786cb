"""COLLCHECK_SIMNCCL=1: an unchanged program's groups are made on the simulated NCCL backend.

For demos, replays and tests that run a plain program (one that names "gloo") under NCCL's
semantics. Installed on c10d right after it executes (capture/startup.py), before torch.distributed
re-exports its functions; collcheck.simnccl itself is imported at the first init_process_group.
"""

from __future__ import annotations

import functools

from ..base.settings import Settings

NAME = "simnccl"
_BACKEND_AT = {"init_process_group": 0, "new_group": 2}  # the `backend` argument's position


def wanted() -> bool:
    return Settings.from_env().simnccl


def install(c10d) -> None:
    for name, at in _BACKEND_AT.items():
        original = getattr(c10d, name)
        if getattr(original, "_simnccl", False):
            continue

        @functools.wraps(original)
        def on_simnccl(*args, _original=original, _at=at, _name=name, **kwargs):
            import collcheck.simnccl  # noqa: F401 - registers the backend

            if len(args) > _at:
                args = (*args[:_at], NAME, *args[_at + 1:])
            elif _name == "init_process_group" or kwargs.get("backend") is not None:
                kwargs["backend"] = NAME
            return _original(*args, **kwargs)
        on_simnccl._simnccl = True
        setattr(c10d, name, on_simnccl)
