"""Live mode's threads in this process: started when the log opens, ended when the rank is done.

Every rank runs a Publisher (live.py); rank 0, or the rank it hands the checking to when it exits
first, also a Checker (live_check.py). A later log (collcheck.disable() then enable()) starts them
again. When the rank's log is closed (exit, disable()), it is left in the store (share.leave) for
a checker that asks for it after this process is gone."""

from __future__ import annotations

import os
import warnings

from . import checker as live_check
from . import publisher as live
from . import share

_publisher: live.Publisher | None = None
_checker: live_check.Checker | None = None
_current = None  # () -> the recorder now
_leave_to = None  # the store the rank's closed log goes to (end() sets it; after_close uses it)


def start(rec, current) -> None:
    """Publish this rank's summaries; on rank 0, also check everyone's. `current`: () -> the
    recorder now (a later enable() makes a new one)."""
    global _publisher, _current
    _current = current
    try:
        if _publisher is None or not _publisher.is_alive():
            store = live.live_store()
            if store is None:
                return
            _publisher = live.Publisher(current, store, rec.rank, rec.config.live_interval, _start_checker)
            _publisher.start()
            if rec.rank == 0:
                _start_checker(rec)
    except Exception as exc:  # a store that cannot be cloned (a custom one): record without live mode
        warnings.warn(f"collcheck: live mode off: {type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)


def _start_checker(rec) -> live_check.Checker:
    global _checker
    if _checker is None or not _checker.is_alive():
        from torch.distributed import distributed_c10d as c10d

        restart = (rec.writer.header or {}).get("restart", 0)
        _checker = live_check.Checker(live.live_store(), c10d.get_world_size(), os.path.dirname(rec.writer.path),
                                      rec.rank, rec.config, _current, restart)
        _checker.start()
    return _checker


def end(rec, state: str = "end") -> None:
    """This rank is done ("end": its default group is destroyed, recording stops or the process
    exits; "err": it raised): say so to the checker, let a checker here look at every rank's final
    summary (also one this rank was handed and has not started yet), stop the threads."""
    global _publisher, _checker, _leave_to
    publisher, checker = _publisher, _checker
    if publisher is not None and not live.reachable(publisher.store):
        live.OFF.set()  # the rank that served the store is gone, and nobody can check: quietly off
        publisher.halt()
        publisher = checker = None
    if publisher is not None and rec.writer is not None:
        try:
            if checker is None and publisher.designated():
                checker = _start_checker(rec)
        except Exception:  # noqa: BLE001 - (the store is gone: nobody to check with)
            pass
        if publisher.final(rec, state):
            _leave_to = publisher.store
    _publisher = _checker = None
    if checker is not None and checker.is_alive():
        checker.last_look()


def after_close(rec) -> None:
    """The rank's log is closed (the process exits, or disable()): leave it in the store, whose
    last summary from this rank said it ended (end()), for a checker that asks later."""
    global _leave_to
    store, _leave_to = _leave_to, None
    if store is None or rec.writer is None or live.OFF.is_set() or not live.reachable(store):
        return  # (nobody can ask for it: the store went with the rank that served it)
    try:
        share.leave(rec, store)
    except Exception as exc:  # noqa: BLE001 - the store went away: live mode off, the exit goes on
        live.turn_off(exc)


def forget_in_child() -> None:
    """A forked child: the parent's threads are not its own."""
    global _publisher, _checker, _leave_to
    _publisher = _checker = _leave_to = None
