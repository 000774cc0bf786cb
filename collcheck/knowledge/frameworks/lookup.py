"""Name a collective by the framework frames of its call chain, and a process group by the
frames that created it.

Only the chain's innermost run of package frames is looked at: a collective the user's own code
issued (the chain ends in the user's frame) is the user's, even inside a Lightning hook or a
Trainer callback, and the framework frames outside that hook say nothing about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ...base.untrusted import one_line
from ..frames import frames_of, framework_name, package_of, relative_path
from . import accelerate, deepspeed, lightning, torchmetrics, transformers
from .entry import ANY, Entry

TABLES = (lightning, accelerate, transformers, deepspeed, torchmetrics)

# decorator and comprehension frames: never what an entry or a fold names
PLUMBING = frozenset(("<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>", "<lambda>", "wrapper", "wrapped",
                      "wrapped_fn", "wrapped_func", "log_wrapper", "_decorator", "decorate_context", "inner")) \
    | deepspeed.PLUMBING


@dataclass(frozen=True)
class FrameworkCall:
    """What a collective is for, in the words of the framework the user wrote against."""

    framework: str  # display name: "Lightning", "accelerate", "transformers", "DeepSpeed"
    words: str  # "Lightning `self.log(..., sync_dist=True)` metric reduction (on step)"
    fix: str  # "call `self.log(..., sync_dist=True)` on every rank, or use ..."
    user_api: str  # the public call the user made that led here: "self.log(..., sync_dist=True)"
    name: str = ""  # the table's function that names it: "ModelCheckpoint.file_exists"
    site: tuple | None = None  # that function's frame in the chain: (file, line, function)
    ends_training: bool = False  # issued once the training loop has ended
    after_loop: bool = False  # issued where a loop over batches has ended (an epoch's end, an evaluation)


def _build():
    """(file, co_name) -> (qualified name, entry or entries); ANY entries by file; display names;
    group roles; path aliases (pytorch_lightning/ -> lightning/pytorch/)."""
    index, wild, names, roles, aliases = {}, {}, {}, {}, []
    for table in TABLES:
        aliases.extend(table.ALIASES.items())
        for (file, qual), value in table.ENTRIES.items():
            if qual == ANY:
                wild[file] = value
                continue
            key = (file, qual.rpartition(".")[2])  # methods of two classes share it: told apart by `via`
            index[key] = index.get(key, ()) + tuple((qual, e) for e in (value if isinstance(value, tuple) else (value,)))
            if sum(not e.via for _, e in index[key]) > 1:
                raise ValueError(f"two table entries for {key} apply to any callee")
        for (file, qual), call in table.NAMES.items():
            names[(file, qual.rpartition(".")[2])] = (qual, call)
        for (file, func), spec in getattr(table, "GROUP_ROLES", {}).items():
            roles[(file, func.rpartition(".")[2])] = spec
    return index, wild, names, roles, tuple(aliases)


_INDEX, _WILD, _NAMES, _ROLES, _ALIASES = _build()


def table_path(path) -> str | None:
    """The file's key in the tables: relative to site-packages, the standalone Lightning packages
    mapped onto `lightning/`'s layout."""
    rel = relative_path(path)
    if rel is None:
        return None
    for prefix, repl in _ALIASES:
        if rel.startswith(prefix):
            return repl + rel[len(prefix):]
    return rel


def display_name(rel: str | None, func: str, callee: str | None = None) -> str:
    """'ModelCheckpoint.file_exists' for a function a table knows, else the function's name
    (methods of two classes sharing the name: the one the callee tells, if it does)."""
    hits = _INDEX.get((rel, func), ())
    quals = {q for q, _ in hits}
    if len(quals) > 1:
        hit = _entry(rel, func, callee)
        return hit[0] if hit else func
    if quals:
        return quals.pop()
    hit = _NAMES.get((rel, func))
    return hit[0] if hit else func


def public_call(rel: str | None, func: str) -> str | None:
    """The user's call for a frame a chain enters a framework by ('trainer.fit(...)'), if known."""
    hit = _NAMES.get((rel, func))
    if hit:
        return hit[1]
    hits = _INDEX.get((rel, func), ())
    return hits[0][1].user_api if len(hits) == 1 else None


def _entry(rel: str | None, func: str, callee: str | None):
    """(qualified name, entry) of the table entry for this frame given its callee, or None."""
    hits = _INDEX.get((rel, func))
    if hits is not None:
        for qual, entry in hits:
            if entry.applies(callee):
                return qual, entry
        return None
    wild = _WILD.get(rel)
    if wild is None or func in PLUMBING or not wild.applies(callee):
        return None
    shown = one_line(func, 80)
    return shown, Entry(wild.words.replace("{func}", shown), wild.fix.replace("{func}", shown), wild.user_api,
                        wild.level, wild.at, wild.via)


def innermost_run(frames: tuple) -> int:
    """Where the chain's innermost run of package frames starts (len(frames): the chain ends in
    the user's frame)."""
    start = len(frames)
    while start > 0 and package_of(frames[start - 1][0]) is not None:
        start -= 1
    return start


def framework_call(chain) -> FrameworkCall | None:
    """The framework call that issued the chain's collective: the innermost run of package frames
    looked up frame by frame, the highest level winning and the outermost among equals; None when
    the user's own frame issued it or no table knows the run."""
    return _framework_call(frames_of(chain))


@lru_cache(maxsize=4096)  # a run has few distinct chains, each met at every step (~75 us to look one up)
def _framework_call(frames: tuple) -> FrameworkCall | None:
    start = innermost_run(frames)
    best, callee = None, None
    for i in range(len(frames) - 1, start - 1, -1):  # innermost first: each frame's callee, decorators skipped
        file, _, func = frames[i]
        hit = _entry(table_path(file), func, callee)
        if func not in PLUMBING:
            callee = func
        if hit is not None and (best is None or hit[1].level >= best[2].level):  # equals: the outer one
            best = (i, hit[0], hit[1])
    if best is None:
        return None
    i, qual, entry = best
    return FrameworkCall(framework_name(package_of(frames[i][0])), entry.words, entry.fix,
                         entry.user_api or _entered_by(frames, start), qual, frames[i], entry.ends_training,
                         entry.after_loop or entry.ends_training)


def _entered_by(frames: tuple, start: int) -> str:
    """The public call the run begins with ('trainer.fit(...)'), skipping decorator frames."""
    for file, _, func in frames[start:]:
        if func in PLUMBING:
            continue
        rel = table_path(file)
        return public_call(rel, func) or one_line(display_name(rel, func), 120) + "(...)"
    return "?"


def group_role(creation_chain) -> str | None:
    """What a process group is for, from the chain of the call that created it ('DeepSpeed
    data-parallel group'); None when no table knows its creator. The innermost frame a table
    knows decides (groups.py's creators, below the user's and the engine's frames)."""
    for file, line, func in reversed(frames_of(creation_chain)):
        spec = _ROLES.get((table_path(file), func))
        if spec is None:
            continue
        if isinstance(spec, str):
            return spec
        for at, role in spec[:-1]:
            if at == line:
                return role
        return spec[-1]
    return None
