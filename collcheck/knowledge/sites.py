"""How a call site and a call chain are named, everywhere: the analysis' messages, every report,
the TUI, the statistics. One place, so that a user reads the same `train.py:40 in main()` for the
same frame in every view.

A site is a recorded frame: (file, line, function), any of them possibly damaged (a log from
elsewhere): every part is shown through `one_line`. The site the user can change is the
program's innermost frame of the call's chain: where a framework's frame issued the call
(`accelerate/utils/operations.py:355`), that is the user's line that called into it, named with
the framework (`train.py:40 in on_evaluate() via accelerate`).
"""

from __future__ import annotations

from itertools import pairwise

from ..base.untrusted import one_line
from .frames import frames_of, framework_name, package_of
from .frameworks.lookup import PLUMBING, display_name, table_path

MAX_NAME = 120  # characters of one file or function name shown (a hostile log's megabyte of name)


def base_name(path) -> str:
    """The file's name without its folders (either separator), '?' for none."""
    if not isinstance(path, str) or not path:
        return "?"
    return path.replace("\\", "/").rpartition("/")[2] or path


def _line(line) -> str:
    return one_line(line, 40) if line is not None else "?"


def short(site) -> str:
    """'train.py:43': the file's name and the line ('?' for no site)."""
    if not site:
        return "?"
    return f"{one_line(base_name(site[0]), MAX_NAME)}:{_line(site[1])}"


def located(site) -> str:
    """'train.py:43 in main()'."""
    if not site:
        return "?"
    return f"{short(site)} in {one_line(site[2], MAX_NAME)}()"


def path_line(site) -> str:
    """'/abs/path/train.py:43': the whole path and the line (the statistics' hints, which a user
    opens in an editor)."""
    if not site:
        return "?"
    return f"{one_line(site[0])}:{_line(site[1])}"


def function_at(site) -> str:
    """'main() at train.py:43': where a rank was, said from its function."""
    if not site:
        return "?"
    return f"{one_line(site[2], MAX_NAME)}() at {short(site)}"


def full(site) -> str:
    """'/abs/path/train.py:43 in main()': the whole path, for a detail pane, `show` and the JSON's readers."""
    if not site:
        return "?"
    return f"{one_line(site[0])}:{_line(site[1])} in {one_line(site[2], MAX_NAME)}()"


def frame_text(frame) -> str:
    """'train.py:43 on_train_epoch_end': a frame of a chain, the way chains list them."""
    file, line, func = frame
    where = one_line(base_name(file), MAX_NAME) + (f":{line}" if line is not None else "")
    return f"{where} {one_line(func, MAX_NAME)}"


def relative_names(paths: list) -> list[str]:
    """Each path below the folder all of them share ('train.py', 'utils/sync.py'): one root for a
    whole chain, never shown (the full paths are in the detail and the JSON)."""
    split = [p.replace("\\", "/").split("/") if isinstance(p, str) and p else ["?"] for p in paths]
    folders = [parts[:-1] for parts in split]
    common = 0
    while folders and all(len(f) > common and f[common] == folders[0][common] for f in folders):
        common += 1
    return ["/".join(parts[common:]) for parts in split]


def chain_line(chain, site=None, most: int = 6) -> str:
    """'train.py:87 evaluate() > utils/sync.py:49 sync() > utils/sync.py:52 in all_sync()': a chain
    of the program's own frames on one line, outermost first, down to the call site, every file
    named below the one folder they share; the outermost frames left out beyond `most`."""
    frames = [x for x in (chain or (site,)) if x is not None]
    if not frames:
        return "?"
    names = relative_names([x[0] for x in frames])
    *outer, last = [(names[k], x[1], x[2]) for k, x in enumerate(frames)]
    parts = [f"{one_line(x[0], MAX_NAME)}:{x[1]} {x[2]}()" for x in outer]
    if len(parts) > most - 1:  # the outermost frame (where the program runs the loop) and the innermost ones
        parts = [parts[0], "…", *parts[len(parts) - (most - 2):]] if most > 2 else ["…"]
    return one_line(" > ".join([*parts, f"{one_line(last[0], MAX_NAME)}:{last[1]} in {last[2]}()"]))


def user_site(site, chain) -> str:
    """The line the user can change: the call site itself when it is the program's ('train.py:43'),
    else the program's innermost frame of the chain and the framework it called
    ('train.py:43 in on_train_epoch_end() via Lightning')."""
    if not site:
        return "?"
    if not chain or package_of(site[0]) is None:
        return short(site)
    packages = [package_of(f[0]) for f in frames_of(chain)]
    inner = next((f for f, p in zip(reversed(frames_of(chain)), reversed(packages)) if p is None), None)
    if inner is None:
        return short(site)
    last = next((p for p in reversed(packages) if p is not None), None)  # the framework it went through
    return located(inner) + (f" via {one_line(framework_name(last))}" if last else "")


MIN_WIDTH = 12  # columns a chain's lines are cut to at the least


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


def chain_lines(frames: tuple, width: int) -> list[str]:
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
            lines.append(frame_text(frames[part[1]]))
        else:
            lines.extend(fold_line(n, f, width) for n, f in part[1])
    return lines
