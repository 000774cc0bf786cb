"""A time limit inside a test, for code that may block where pytest-timeout cannot help (the open
of a FIFO named as a log or a dump)."""

from __future__ import annotations

import contextlib
import signal


class Hung(BaseException):
    """Not an Exception: no `except` of the code under test swallows it."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Hung once `seconds` have passed, and every second after: a blocking system call is
    interrupted; the handler is restored afterwards."""
    def expired(_signum, _frame):
        raise Hung(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
