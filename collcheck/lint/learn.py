"""`collcheck lint --logs RUN`: the calls a recorded run shows issuing collectives.

Each recorded call chain lists the user's frames from the outermost to the collective; every call
on one of their lines led to it. Those calls the lint cannot follow into the program's own
functions (`model(x)` of a module whose forward gathers, `averager.average_parameters(...)` of a
package no table describes) are then known, by their source, to issue collectives wherever the
program makes them. Recorded paths come from another machine: a frame is
matched to a linted file by the longest common tail of their paths, never opened by its name.
"""

from __future__ import annotations

import ast
import os

from ..knowledge import fixes
from ..knowledge.frameworks import split_chain
from .calls import Issued
from .syntax import dotted
from .vocabulary import Api

MAX_CHAINS = 200_000  # distinct chains read from one run (bounds the work a hostile run can cause)


class Learned:
    def __init__(self):
        self.sites: set[tuple[str, int]] = set()  # (linted path, line) of a call into a package
        self.names: set[str] = set()  # those calls' source names ("trainer.save_model")

    def issued(self, mod, node: ast.Call, name: str | None) -> Issued | None:
        text = dotted(node.func)
        if (mod.path, node.lineno) in self.sites or (text is not None and text in self.names):
            return Issued(Api(f"collectives (a recorded run issued them from `{text or mod.text(node)}(...)`)",
                              fixes.call_on_every_rank(f"{text or mod.text(node)}(...)"), "recorded run"))
        return None


def learn_from_run(directory: str, program) -> Learned:
    from ..model import load_run

    run = load_run(directory)
    learned = Learned()
    by_base: dict[str, list] = {}
    for m in program.modules:
        by_base.setdefault(os.path.basename(m.path), []).append(m)
    calls_at: dict[str, dict[int, list]] = {}
    seen = set()
    for log in run.ranks.values():
        for frames in log.chain_sites.values():
            if frames in seen or len(seen) >= MAX_CHAINS:
                continue
            seen.add(frames)
            for frame in _entries(frames):
                mod = _module_of(frame[0], by_base)
                if mod is None:
                    continue
                learned.sites.add((mod.path, frame[1]))
                lines = calls_at.get(mod.path)
                if lines is None:
                    lines = calls_at[mod.path] = _calls_by_line(mod.tree)
                for call in lines.get(frame[1], ()):
                    text = dotted(call.func)
                    if text is not None and program.resolve(mod, text) is None:
                        learned.names.add(text)
    return learned


def _entries(frames) -> list:
    """The user's frames of a chain: the calls on their lines led to a collective. Those the lint
    can follow into the program's own functions are known already; the others (a module's
    `model(x)` whose forward gathers, a package's API) are what the run teaches."""
    view = split_chain(frames)
    return [f for f in view.user if isinstance(f, tuple) and len(f) >= 2 and isinstance(f[0], str)
            and isinstance(f[1], int)]


def _module_of(recorded: str, by_base: dict):
    """The linted module a recorded file is: same name, longest common tail of directories."""
    parts = recorded.replace("\\", "/").split("/")
    best, score = None, 0
    for m in by_base.get(parts[-1], ()):
        mine = os.path.abspath(m.path).split(os.sep)
        n = 0
        while n < min(len(mine), len(parts)) and mine[-1 - n] == parts[-1 - n]:
            n += 1
        if n > score:
            best, score = m, n
    return best


def _calls_by_line(tree: ast.AST) -> dict[int, list]:
    out: dict[int, list] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            out.setdefault(node.lineno, []).append(node)
    return out
