"""Turning recording on and off for this process: patches, kernels, hooks, watchdog, poller."""

from __future__ import annotations

import atexit
import os
import sys
import threading

from ..base.settings import Settings, safe_run_id
from .recorder import Recorder

RUN_KEY = "collcheck/run"  # (the job's store) the run's name its ranks agreed on

_lock = threading.Lock()
_recorder: Recorder | None = None
_watchdog = None
_poller = None
_hooks_installed = False


def recorder() -> Recorder | None:
    return _recorder


def enable(config: Settings | None = None, c10d=None) -> Recorder:
    """Patch torch.distributed and record from the next (or the current) process group.

    `c10d` is passed by the startup hook while torch is still importing it."""
    global _recorder
    with _lock:
        if _recorder is not None and (_recorder.active or _recorder.writer is None and not _recorder.failed):
            return _recorder
        if c10d is None:
            from torch.distributed import distributed_c10d as c10d
        from . import torch_api as api

        rec = _recorder = Recorder(config or Settings.from_env().check())
        api.install(rec, c10d, start_log, end_live)
        _install_process_hooks()
        if getattr(c10d, "_world", None) is not None and c10d.is_initialized():
            start_log(rec)
        return rec


def start_log(rec: Recorder) -> None:
    """The rank is known: open its log, register the dispatcher kernels, start the watchdog."""
    global _watchdog
    from torch.distributed import distributed_c10d as c10d

    from . import dispatcher as kernels
    from . import watchdog

    rec.open(c10d.get_rank(), c10d.get_world_size(), str(c10d.get_backend_config()), run_id=_run_id(rec.config, c10d))
    if kernels.install(lambda: _recorder):
        from . import torch_api as api

        api.unwrap_for_compiled_kernels(c10d)
    watchdog.register_sigterm_dump(rec.writer.path)
    rec.on_polled_group(_start_poller)
    if _watchdog is None or not _watchdog.is_alive():
        _watchdog = watchdog.Watchdog(lambda: _recorder)
        _watchdog.start()
    _install_step_hook()  # (here, not at enable(): torch may still be importing then)
    if rec.config.live:
        from .live import session as live_session

        live_session.start(rec, lambda: _recorder)


def _run_id(cfg: Settings, c10d) -> str:
    """The run's name (Settings.resolved_run_id). Where no launcher named it for every rank (no
    torchrun, no COLLCHECK_RUN_ID: srun, mpirun, a shell each), each rank named it itself: the
    first name set in the job's store is then every rank's, so that one launch is one folder."""
    run_id = cfg.resolved_run_id()
    if not cfg.named_by_each_rank():
        return run_id
    try:
        agreed = c10d._get_default_store().compare_set(RUN_KEY, "", run_id)  # (the first one set wins)
        text = agreed.decode("ascii") if isinstance(agreed, bytes) else str(agreed)
    except Exception:  # noqa: BLE001 - a store without compare_set, or gone: this rank's own name
        return run_id
    return text if safe_run_id(text) else run_id


def _start_poller() -> None:
    """A group whose completions are polled appeared (Recorder.group_id): the poller runs."""
    global _poller
    if _poller is None or not _poller.is_alive():
        from .poller import Poller

        rec = _recorder
        _poller = Poller(lambda: _recorder, (rec.config.poll_ms if rec is not None else 5.0) / 1000)
        _poller.start()


def _last_completions(rec: Recorder) -> None:
    """What the poller would see next and what waits in the queues, written before the log closes."""
    if _poller is not None:
        rec.poll_completions()
    with rec.writer.lock:
        rec.drain_completions()


def end_live(rec: Recorder, state: str = "end") -> None:
    """Live mode's last word for this rank (live_session.end); the default group's destroy, disable(),
    exit and an uncaught exception call it."""
    from .live import session as live_session

    live_session.end(rec, state)


def after_close_live(rec: Recorder) -> None:
    """The log is closed: live mode leaves it in the job's store for a checker (live_session.after_close)."""
    if not rec.config.live:
        return
    from .live import session as live_session

    live_session.after_close(rec)


def disable() -> str | None:
    """Stop recording, close the log and restore torch.distributed; returns the log path."""
    global _recorder
    with _lock:
        rec = _recorder
        if rec is None:
            return None
        from torch.distributed import distributed_c10d as c10d

        from . import dispatcher as kernels
        from . import torch_api as api
        from . import watchdog

        end_live(rec)
        rec.active = False
        path = rec.writer.path if rec.writer else None
        if rec.writer is not None:
            _last_completions(rec)
            api.record_exit(rec, clean=True)
            rec.writer.close()
            after_close_live(rec)
        api.uninstall(c10d)
        kernels.remove()
        watchdog.unregister_sigterm_dump()
        _recorder = None
        return path


def _install_process_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_at_exit)
    previous = sys.excepthook

    def excepthook(tp, value, tb):
        rec = _recorder
        if rec is not None:
            from . import torch_api as api

            api.record_exit(rec, clean=False, exc=value)
            end_live(rec, "err")
        previous(tp, value, tb)

    sys.excepthook = excepthook
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)


_step_hook_installed = False


def _install_step_hook() -> None:
    """Where training steps end: torch.optim's global post-step hook (every optimizer, once)."""
    global _step_hook_installed
    if _step_hook_installed:
        return
    _step_hook_installed = True
    try:
        from torch.optim.optimizer import register_optimizer_step_post_hook
    except ImportError:  # (an older torch: no steps in the logs)
        return

    def after_step(optimizer, args, kwargs) -> None:
        rec = _recorder
        if rec is not None:
            try:
                rec.on_optimizer_step(optimizer)
            except Exception as exc:  # noqa: BLE001 - never break the step: stop recording instead
                rec.fail(exc)

    register_optimizer_step_post_hook(after_step)


def _at_exit() -> None:
    rec = _recorder
    if rec is None or rec.writer is None:
        return
    from . import torch_api as api
    from . import watchdog

    end_live(rec)
    rec.active = False
    try:
        _last_completions(rec)
    except Exception:
        pass
    api.record_exit(rec, clean=True)
    try:
        rec.writer.close()
    except Exception:
        pass
    after_close_live(rec)
    watchdog.unregister_sigterm_dump()  # removes the dump file when nothing was written


def _after_fork_in_child() -> None:
    global _watchdog, _poller
    rec = _recorder
    if rec is not None:
        rec.after_fork_in_child()
    _watchdog = _poller = None  # (threads do not survive fork)
    from . import watchdog
    from .live import session as live_session

    live_session.forget_in_child()

    watchdog.forget_dump_in_child()
