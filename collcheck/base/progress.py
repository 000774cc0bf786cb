"""What a long read or conversion is doing, for the person waiting: the layers that do the work
say how far they are (`tracked`); the command decides whether and how it is shown (`use`: the
report layer's stderr display). Nothing is shown by default, so library callers and tests see
nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


class Progress:
    """Shows nothing: the default. A display overrides the three methods."""

    def start(self, what: str, total: int) -> None:
        """A step of `total` items begins ("reading logs", 4096)."""

    def advance(self, n: int = 1) -> None:
        """`n` more items of the current step are done."""

    def finish(self) -> None:
        """The current step is over (its display goes away)."""


_current = Progress()


def use(progress: Progress | None) -> Progress:
    """Show progress with `progress` from now on (None: nothing); returns the one it replaces."""
    global _current
    previous = _current
    _current = progress or Progress()
    return previous


def tracked(what: str, items: Iterable[T], total: int, size: Callable[[T], int] | None = None) -> Iterator[T]:
    """`items`, telling the current display each time one is done (`size`: how many of `total`
    an item stands for, when items are batches)."""
    shown = _current
    shown.start(what, total)
    try:
        for item in items:
            yield item
            shown.advance(1 if size is None else size(item))
    finally:
        shown.finish()
