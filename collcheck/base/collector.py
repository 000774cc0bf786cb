"""Python's cycle collector paused while a run's objects are built.

Loading and analysing a run makes millions of objects that live as long as the run (columns,
groups, sequences): the collector would walk them again and again and find nothing (a third of
the time of a run of 100,000 groups). Nested and concurrent blocks (the TUI loads in a worker
thread) share one pause: the collector runs again when the last of them ends, if it ran before
the first began.
"""

from __future__ import annotations

import contextlib
import gc
import threading

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def paused():
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
