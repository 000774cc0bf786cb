"""`collcheck replay`'s output: progress and result lines through the one console (stdout; stderr
with --format json, whose document is then all that stdout holds).

A finding is named by its key, (kind, group, position, culprit ranks) in recorded ranks and group
names (replay/runner.finding_key). Log-derived fields are escaped where each line is built;
`Printer.line` escapes the whole line again, the last guard: no control character reaches the
terminal whatever a caller forgot.
"""

from __future__ import annotations

import sys

from ..base.untrusted import one_line, visible
from ..model import rank_ranges
from .console import make_console
from .json_report import write_json


def key_text(key) -> str:
    if key is None:
        return "none"
    kind, group, position, ranks = key
    return f"{one_line(kind)} in group {one_line(group)} at #{position}, culprit rank(s) {rank_ranges(list(ranks))}"


def key_json(key):
    if key is None:
        return None
    kind, group, position, ranks = key
    return {"kind": kind, "group": group, "position": position, "ranks": list(ranks)}


def script_note(key, message: str | None) -> str:
    """What the emitted script says it reproduces (data in the script, never its code)."""
    if key is None:
        return "The recording has no finding."
    return f"Recorded first finding: {key_text(key)}\n  {message}"


class Printer:
    """The replay's lines, as it goes: the recording, the replay's outcome, its verdict (text:
    the output itself, on stdout)."""

    def __init__(self, out=None):
        self.console = make_console(out or sys.stdout)

    def line(self, text: str) -> None:
        self.console.print(visible(text, limit=1 << 16), soft_wrap=True)  # (soft: never wrapped nor cut)

    def started(self, run, verdict: str, recorded, scale_note, edits, plan) -> None:
        """What is replayed: the recording, its first finding, the ranks, the what-ifs, the plan."""
        self.line(f"collcheck replay: {one_line(run.directory)}  ({len(run.ranks)} recorded ranks, "
                  f"verdict {verdict.upper()})")
        if recorded is not None:
            self.line(f"recorded first finding: {key_text(recorded)}")
        if scale_note:
            self.line(one_line(scale_note))
        for e in edits:
            self.line(f"what-if: {e.describe()}")
        for n in plan.notes:
            self.line(f"note: {one_line(n)}")
        self.line(f"replaying {plan.n_ops()} collective(s) on {plan.world} {plan.backend} process(es), "
                  f"timeout {plan.timeout_s:g} s ...")

    def finished(self, plan, outcome, exits: list[str], got) -> None:
        """How each process ended, where the blocked ones were, the replay's first finding."""
        self.line(f"replay {outcome.status.upper()} in {outcome.wall_s:.1f} s: " + ", ".join(
            f"rank {plan.rank_map[r]} {text}" for r, text in enumerate(exits)))
        for r, where in outcome.blocked().items():
            self.line(f"  rank {r}: {one_line(where)}")
        if outcome.report is None:
            self.line("the replay wrote no readable logs; its output:")
            for r, text in enumerate(outcome.outputs):
                self.line(f"--- rank {r}\n{visible(text[-1500:])}")
        elif got is not None:
            self.line(f"replay first finding:   {key_text(got)}")
            self.line("  " + visible(outcome.report.first.message))
        else:
            self.line("replay first finding:   none")

    def what_if(self, fixed: bool) -> None:
        self.line("the what-if " + ("fixes it: the replay completes with no finding" if fixed
                                    else "does not make the replay complete cleanly"))

    def matches(self, matches: bool, recorded, got, scaled_down: bool) -> None:
        self.line("matches the recording: " + ("yes" if matches else "NO") + (
            "" if matches else f" (recorded {key_text(recorded)}, replayed {key_text(got)})"))
        if not matches and scaled_down:
            self.line("the scaled-down replay does not reproduce the recording: replay more ranks (--ranks all)")

    def not_minimizing(self) -> None:
        self.line("not minimizing: the replay does not reproduce the recorded finding")

    def minimizing(self, max_tests: int) -> None:
        self.line(f"minimizing (delta debugging, at most {max_tests} trial replays) ...")

    def minimized(self, kept: int, of: int, tests: int) -> None:
        self.line(f"kept {kept} of {of} collective(s) after {tests} trial replay(s)")

    def wrote_script(self, path: str, world: int) -> None:
        self.line(f"wrote {one_line(path)}: run it with  torchrun --nproc-per-node {world} {one_line(path)}")

    def document(self, doc: dict) -> None:
        """The result as a document: the text has said it all."""


class JsonPrinter(Printer):
    """--format json: the same lines on stderr, and the result as one JSON document on stdout."""

    def __init__(self):
        super().__init__(sys.stderr)

    def document(self, doc: dict) -> None:
        write_json(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
