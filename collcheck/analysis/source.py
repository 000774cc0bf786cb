"""Blame from the program: which camp entered a rank-dependent branch.

Two ranks that part at one slot leave a symmetric trace ("rank 0 issued X, rank 1 issued Y" reads
the same whoever took a branch). The program that made them do it is usually on disk beside the
logs: the divergent call of one camp sits inside `if rank == 0:`, `if accelerator.is_main_process:`,
under `@rank_zero_only`, after a per-rank `break`, where the other camp's call does not. collcheck
lint reads exactly those conditions; here the lint reads the files of the two camps' call chains
(parsed, never imported or run; regular `.py` files of at most lint's size, a bounded number of
them) and says which conditions enclose each camp's frames:

- a condition (`if`, its `else`, a rank-only decorator) around one camp's frames and not the
  other's: that camp entered the branch;
- an early exit some ranks take (`return`, `break` after a per-rank test) before one camp's call:
  that camp passed it, the other took it and skipped what follows.

With no majority, the camp out of step is the side of the condition fewer ranks take (`if rank ==
0:` lets one in, `if rank != 0:` keeps one out); it issued a call the others did not, or skipped
one. With a majority, the majority names the culprit and the source says which of the two it did
and where.

A file that is not here, not readable or not the one recorded (its size and time, or its hash,
differ from the recording's) is not used: the finding says so and the trace's rules decide.
`root` maps the recorded paths onto a checkout (logs from another machine).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from ..knowledge import sites
from ..knowledge.frames import USER, owner
from ..lint.findings import holds
from ..logfile.writer import file_hash

MAX_FILES = 48  # files read for one question: the chains' own, then their folders' modules
MAX_FILE_BYTES = 4 << 20  # as lint (a generated file past this is not the program's logic)
BRANCHY = ("branch", "else", "decorator")


@dataclass(frozen=True)
class Reading:
    """What the source says of two camps' divergent calls: a condition that encloses one camp's
    frames and not the other's (`camp`: that one), a branch it entered or an early exit it passed
    (`exit`), and which ranks of the world the condition lets through where that can be worked
    out (`through`: None when it cannot, e.g. a framework's "main process" flag)."""

    camp: int
    guard: object  # lint's Guard
    exit: bool
    condition: tuple  # (file, line, text) of the condition, the file as recorded
    through: frozenset | None

    def culprit(self, world: int) -> int:
        """The camp out of step when no majority says so: the side of the condition fewer ranks
        take (`if rank == 0:` lets one rank in; `if rank != 0:` keeps one out; a flag of the main
        process, or this rank's own data, lets the exception in)."""
        inside = self.camp if not self.exit else 1 - self.camp  # the ranks the condition holds for
        if self.through is not None and 2 * len(self.through) > world:
            return 1 - inside
        return inside

    def kind(self, culprit: int) -> str:
        """'extra': the culprit's frames are the ones the condition encloses (it entered the branch,
        or went on past an exit the others took); 'missing': the others' are (it skipped the call)."""
        return "extra" if culprit == self.camp else "missing"

    def rule(self, culprit: int) -> str:
        g = self.guard
        where = f"`{g.text}` at {sites.short(self.condition[:2])}"
        depends = f"(the condition depends on {'the rank' if g.kind == 'rank' else 'this rank' + chr(39) + 's own data'})"
        if self.exit:
            if culprit != self.camp:
                return f"it left early at {where} {depends} and skipped what the others went on to issue"
            return f"it went on past {where} {depends}, where the others left early"
        if culprit == self.camp:
            if g.how == "else":
                return f"it went into the else of {where} {depends}; the others did not"
            if g.how == "decorator":
                return f"it ran a function decorated {where}; the others did not"
            return f"it entered {where} {depends}; the others did not"
        if g.how == "else":
            return f"it entered {where} {depends} and skipped its else, where the others issued the call"
        return f"it did not enter {where} {depends}, where the others issued the call"


class ProgramSource:
    """The program's files at a run's call sites, read once per question."""

    def __init__(self, run, root: str | None = None):
        self.run, self.root = run, root
        self.unused: dict[str, str] = {}  # recorded file -> why it was not read
        self.asked = False  # a question came: a camp's call in the program's own files
        self._prints = run.source_prints  # what the recorders saw of each file (L records)
        self._local: dict[str, str | None] = {}

    # -- where a recorded file is here -------------------------------------------------------
    def local(self, recorded: str) -> str | None:
        """This machine's copy of a recorded file (mapped under `root`), when it is the one the
        run recorded; None (and the reason kept) otherwise."""
        if recorded in self._local:
            return self._local[recorded]
        found = None
        for candidate in self._candidates(recorded):
            why = self._unusable(candidate, recorded)
            if why is None:
                found = candidate
                break
            if why != "not found" or recorded not in self.unused:  # a copy found but unfit says more
                self.unused[recorded] = why
        if found is not None:
            self.unused.pop(recorded, None)
        elif recorded not in self.unused:
            self.unused[recorded] = "not found"
        self._local[recorded] = found
        return found

    def _candidates(self, recorded: str) -> list[str]:
        if not recorded.endswith(".py") or "\0" in recorded:
            return []
        if self.root is None:
            return [recorded]
        parts = recorded.replace("\\", "/").split("/")
        return [os.path.join(self.root, *parts[k:]) for k in range(1, len(parts)) if parts[k]][::-1][:64][::-1]

    def _unusable(self, path: str, recorded: str) -> str | None:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return "not found"
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return "not a regular file of a program"
        seen = self._prints.get(recorded)
        if seen and not _same_file(seen, path, st, same_path=path == recorded):
            return "changed since the run"
        return None

    # -- which conditions enclose the camps' frames -------------------------------------------
    def read(self, frames_a: tuple, frames_b: tuple, world: int) -> Reading | None:
        """What the source says of two camps' divergent calls (their chains, outermost first):
        the condition around one camp's frames and not the other's; None when it says nothing."""
        mine = [_user_frames(frames_a), _user_frames(frames_b)]
        if not mine[0] and not mine[1]:
            return None
        self.asked = True
        located = [[(f, self.local(f[0])) for f in frames] for frames in mine]
        if not any(path for camp in located for _, path in camp):
            return None
        guards = self._guards([[(path, f[1]) for f, path in camp if path] for camp in located])
        if guards is None:
            return None
        return _reading(guards, located, world)

    def _guards(self, camps: list[list[tuple]]) -> list[dict] | None:
        """For each camp, {guard key: guard} of the conditions around its frames."""
        from ..lint.interprocedural import Lint
        from ..lint.program import load

        wanted = sorted({path for camp in camps for path, _ in camp})
        files = list(wanted)
        for folder in sorted({os.path.dirname(p) for p in wanted}):
            try:
                siblings = sorted(os.listdir(folder))
            except OSError:
                continue
            files += [os.path.join(folder, n) for n in siblings if n.endswith(".py")
                      and os.path.join(folder, n) not in wanted][:MAX_FILES]
        files = list(dict.fromkeys(files))[:MAX_FILES]
        try:
            lint = Lint(load(files))
        except (OSError, ValueError, RecursionError, MemoryError):
            return None
        for camp in camps:
            for path, line in camp:
                if isinstance(line, int):
                    lint.probes[path] = lint.probes.get(path, frozenset()) | {line}
        try:
            lint.run()
        except (RecursionError, MemoryError):
            return None
        out = []
        for camp in camps:
            found: dict = {}
            for path, line in camp:
                for g in lint.probed.get((path, line), ()):
                    found.setdefault((g.path, g.line, g.how), g)
            out.append(found)
        return out

    def note(self) -> str | None:
        """What could not be read, for the report ('source not available here: train.py (not
        found); blame from the trace')."""
        if not self.unused or not self.asked:
            return None
        names = ", ".join(f"{sites.base_name(p)} ({why})" for p, why in sorted(self.unused.items())[:4])
        more = f" and {len(self.unused) - 4} more" if len(self.unused) > 4 else ""
        return f"source not available here: {names}{more}; blame from the trace"


def _same_file(seen: dict, path: str, st, same_path: bool) -> bool:
    """Whether the file here is the one the run recorded: its content hash when the recorder left
    one, else (the same path) its size and modification time, else (a checkout elsewhere) its size."""
    if "h" in seen:
        try:
            with open(path, "rb") as f:
                return file_hash(f.read(MAX_FILE_BYTES + 1)) == seen["h"]
        except (OSError, ValueError):
            return False
    if "s" in seen and seen["s"] != st.st_size:
        return False
    return not same_path or "m" not in seen or seen["m"] == st.st_mtime_ns


def _user_frames(frames: tuple) -> list:
    return [f for f in frames or () if f and isinstance(f[0], str) and owner(f[0]) == USER]


def _reading(guards: list[dict], located: list[list], world: int) -> Reading | None:
    """The condition that tells the camps apart: a branch around one camp's frames only (the
    innermost), else an early exit before one camp's frames only; None when both camps sit in
    conditions of their own (two arms of one `if`) or in none."""
    only = [[g for k, g in guards[i].items() if k not in guards[1 - i]] for i in (0, 1)]
    branch = [[g for g in o if g.how in BRANCHY] for o in only]
    exits = [[g for g in o if g.how == "exit"] for o in only]
    for i in (0, 1):
        if branch[i] and not branch[1 - i]:
            return _made(i, branch[i][-1], False, located, world)
    for i in (0, 1):
        if exits[i] and not exits[1 - i] and not (branch[0] or branch[1]):
            return _made(i, exits[i][-1], True, located, world)
    return None


def _made(camp: int, g, exit_: bool, located: list, world: int) -> Reading:
    recorded = next((f[0] for f, path in located[camp] if path == g.path), g.path)
    return Reading(camp, g, exit_, (recorded, g.line, g.text), _through(g, world))


def _through(g, world: int) -> frozenset | None:
    """The ranks of the world the condition holds for, where it is a comparison of one rank value
    with a literal (lint's reading of `rank == 0`, `LOCAL_RANK != 0`, `not is_main`...); else None."""
    if g.kind != "rank" or g.test is None or not 0 < world <= 4096:
        return None
    try:
        held = frozenset(r for r in range(world) if holds(g.test, r))
    except (ValueError, TypeError, KeyError, SyntaxError):
        return None
    if g.how == "else":
        held = frozenset(range(world)) - held
    return held
