"""Call chains in the terms of the frameworks users write against (Lightning, accelerate, the
transformers Trainer, DeepSpeed), read from the chain's file paths and function names alone.

Most users never call `torch.distributed` themselves: a collective comes from `self.log(...,
sync_dist=True)`, `gather_for_metrics`, a Trainer's checkpoint save. `split_chain` separates a
chain's user frames from installed packages' frames, `framework_call` names what the framework
was doing and the fix in its terms, `group_role` names a DeepSpeed process group (how a chain is
shown: ../sites.py). Tables (one module per framework) cite the
installed version's source; no framework is ever imported here, so one not installed costs
nothing, and logs from machines with other versions are read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..frames import FRAMEWORK_NAMES, frames_of, framework_name, package_of
from .lookup import FrameworkCall, framework_call, group_role, innermost_run, table_path

__all__ = ["FRAMEWORK_NAMES", "ChainView", "FrameworkCall", "framework_call", "framework_name", "group_role",
           "innermost_run", "package_of", "split_chain", "table_path"]


@dataclass(frozen=True)
class ChainView:
    """A chain split into the user's frames and the runs of installed packages' frames."""

    chain: tuple  # every frame, outermost first, as (file, line, function)
    user: tuple  # the user's frames, outermost first
    outer: tuple | None  # the user's outermost frame
    inner: tuple | None  # the user's innermost frame
    folds: tuple  # ((display name, frames), ...): runs of consecutive frames of one package, chain order
    call: FrameworkCall | None  # what the framework was doing when it issued the collective


def split_chain(chain) -> ChainView:
    frames = frames_of(chain)
    user, folds = [], []
    for frame in frames:
        pkg = package_of(frame[0])
        if pkg is None:
            user.append(frame)
            continue
        name = framework_name(pkg)
        if folds and folds[-1][0] == name and folds[-1][2] == len(user):
            folds[-1] = (name, folds[-1][1] + (frame,), len(user))
        else:
            folds.append((name, (frame,), len(user)))
    return ChainView(frames, tuple(user), user[0] if user else None, user[-1] if user else None,
                     tuple((name, fs) for name, fs, _ in folds), framework_call(frames))

