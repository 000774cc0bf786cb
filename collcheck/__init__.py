"""collcheck: record every collective of every rank, then find where the ranks diverged."""

from __future__ import annotations

import contextlib

from .base import __version__  # noqa: F401  (collcheck.__version__)


def enable(directory: str | None = None, *, full_stack: bool | None = None, hang_seconds: float | None = None,
           run_id: str | None = None):
    """Start recording in this process (notebooks, tests). Settings default to the environment.

    The log opens at `init_process_group` (or now, if a default group exists)."""
    from .base.settings import Settings
    from .capture import session

    config = Settings.from_env().check()
    if directory is not None:
        config.directory = directory
    if full_stack is not None:
        config.full_stack = full_stack
    if hang_seconds is not None:
        config.hang_seconds = hang_seconds
    if run_id is not None:
        config.run_id = run_id
    return session.enable(config)


def disable() -> str | None:
    """Stop recording and close the log; returns its path (None if nothing was recorded)."""
    from .capture import session

    return session.disable()


@contextlib.contextmanager
def recording(directory: str | None = None, **settings):
    """`with collcheck.recording("logs"):` records the collectives issued inside the block."""
    enable(directory, **settings)
    try:
        yield
    finally:
        disable()
