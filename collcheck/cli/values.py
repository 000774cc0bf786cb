"""Command-line values, checked as data before anything is read or allocated for them.

argparse's `type=int` takes `10**30` and `type=float` takes `nan`, `inf` and `1e300`: a context
of 10^16 rows, a replay timeout nobody can wait for, a path with a NUL byte that the OS refuses
with a ValueError. Each type here takes only what the option can use and says why in argparse's
own usage error (exit 2). Ranks are checked against the run's world once it is known, before a
rank list is built (`rank_list`).
"""

from __future__ import annotations

import argparse
import math

from ..base.errors import UsageError

MAX_PATH = 4096  # bytes of a path (Linux's PATH_MAX)


def path(text: str) -> str:
    """A file or folder name: no NUL byte (no OS takes one), not longer than a path can be."""
    if "\0" in text:
        raise argparse.ArgumentTypeError("a path cannot hold a NUL byte")
    if len(text.encode("utf-8", "surrogateescape")) > MAX_PATH:
        raise argparse.ArgumentTypeError(f"a path of more than {MAX_PATH} bytes")
    return text


def count(lo: int, hi: int):
    """An argparse type: a whole number in lo..hi."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text[:40]!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"expected a number in {lo}..{hi}")
        return value
    parse.__name__ = "count"  # (argparse names the type in its message)
    return parse


def seconds(most: float):
    """An argparse type: a finite number of seconds above 0 and at most `most`."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text[:40]!r}") from None
        if not math.isfinite(value) or not 0 < value <= most:
            raise argparse.ArgumentTypeError(f"expected a number of seconds above 0 and at most {most:g}")
        return value
    parse.__name__ = "seconds"
    return parse


def rank_list(text: str, world: int, option: str = "--ranks") -> list[int]:
    """`0,3,5-7` as a sorted list of ranks of a run of `world` ranks; every part is checked against
    the world before the list is built, so `0-100000000000` is refused, not expanded."""
    spans = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        first, sep, last = part.partition("-")
        try:
            a, b = int(first), int(last) if sep else int(first)
        except ValueError:
            raise UsageError(f"{option} {text[:80]!r}: expected all, auto or a list like 0,3,5-7") from None
        if not 0 <= a <= b < world:
            raise UsageError(f"{option} {text[:80]!r}: ranks must be in 0..{world - 1}, each range low-high")
        spans.append((a, b))
    if not spans:
        raise UsageError(f"{option} {text[:80]!r}: no rank in it")
    return sorted({r for a, b in spans for r in range(a, b + 1)})
