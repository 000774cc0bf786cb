"""A call chain as a few short lines: the user's frames in full, each run of one framework's
frames folded into one line ("via Lightning: Trainer.fit > ... > _sync_ddp").

Reports used to cut a chain from the top to fit the width, which dropped the only frame of the
program (`trainer.fit(...)`) and kept framework files. Here the user's outermost and innermost
frames are never cut or dropped, whatever the width; a fold line too long is cut in its middle.
"""

from __future__ import annotations

from itertools import pairwise

from ...base.untrusted import one_line
from ..frames import framework_name, package_of
from .lookup import PLUMBING, display_name, table_path

MAX_NAME = 120  # characters of one file or function name shown (a hostile log's megabyte of name)
MIN_WIDTH = 12


def user_frame_text(frame: tuple) -> str:
    """'train.py:43 on_train_epoch_end': the file's base name, the line, the function."""
    file, line, func = frame
    base = file.replace("\\", "/").rpartition("/")[2] or file or "?"
    where = one_line(base, MAX_NAME) + (f":{line}" if line is not None else "")
    return f"{where} {one_line(func, MAX_NAME)}"


def fold_line(name: str, frames: tuple, width: int) -> str:
    """'via Lightning: ...' in `width` columns: the body cut in its middle, the framework's name
    kept while there is room for it."""
    text = "via " + fold_text(name, frames)
    head, _, body = text.partition(": ")
    if len(text) <= width or len(head) + 8 > width:
        return cut_middle(text, width)
    return f"{head}: {cut_middle(body, width - len(head) - 2)}"


def fold_text(name: str, frames: tuple) -> str:
    """'Lightning: Trainer.fit > ... > _sync_ddp': first and last function, decorator frames
    left out (unless nothing else is there)."""
    shown = [f for f in frames if f[2] not in PLUMBING] or list(frames)
    callees = {id(f): g[2] for f, g in pairwise(shown)}
    names = [one_line(display_name(table_path(f[0]), f[2], callees.get(id(f))), MAX_NAME)
             for f in (shown[0], shown[-1])]
    if len(shown) == 1:
        body = names[0]
    elif len(shown) == 2:
        body = f"{names[0]} > {names[1]}"
    else:
        body = f"{names[0]} > ... > {names[1]}"
    return f"{one_line(name, MAX_NAME)}: {body}"


def _stretches(frames: tuple):
    """Chain order: ('user', index) per user frame, ('via', [(name, frames), ...]) per run of
    package frames (consecutive frames of one framework folded; a framework sandwiched between
    two folds of another, Lightning's torchmetrics base class, folded into it)."""
    out = []
    for i, frame in enumerate(frames):
        pkg = package_of(frame[0])
        if pkg is None:
            out.append(("user", i))
            continue
        name = framework_name(pkg)
        if not out or out[-1][0] != "via":
            out.append(("via", []))
        folds = out[-1][1]
        if folds and folds[-1][0] == name:
            folds[-1] = (name, folds[-1][1] + (frame,))
        elif len(folds) >= 2 and folds[-2][0] == name:
            folds[-2:] = [(name, folds[-2][1] + folds[-1][1] + (frame,))]
        else:
            folds.append((name, (frame,)))
    return out


def cut_middle(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    keep = width - 1
    return text[:(keep + 1) // 2] + "…" + text[len(text) - keep // 2:]


def render_chain(frames: tuple, width: int) -> list[str]:
    """The chain's lines for `width` columns: the user's outermost and innermost frames always,
    the user's frames next to a framework (the call into it, the hook it called back), each run
    of one framework's frames as one 'via' line, other user frames counted ('… 3 frames of the
    program'). Only 'via' lines are cut, in their middle."""
    width = max(MIN_WIDTH, width)
    parts = _stretches(frames)
    users = [p[1] for p in parts if p[0] == "user"]
    keep = {users[0], users[-1]} if users else set()
    for k, part in enumerate(parts):
        if part[0] == "via":
            keep.update(parts[j][1] for j in (k - 1, k + 1) if 0 <= j < len(parts) and parts[j][0] == "user")
    lines, hidden = [], 0
    for part in parts:
        if part[0] == "user" and part[1] not in keep:
            hidden += 1
            continue
        if hidden:
            lines.append(f"… {hidden} frame{'s' if hidden > 1 else ''} of the program")
            hidden = 0
        if part[0] == "user":
            lines.append(user_frame_text(frames[part[1]]))
        else:
            lines.extend(fold_line(n, f, width) for n, f in part[1])
    return lines
