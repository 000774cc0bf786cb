"""The recorder: one per process, fed by the dispatcher kernels and the API wrappers.

It holds its collaborators, each with its own state: the engine (the counters and tables both
paths share: engine_python.py, or engine_native.py while the compiled kernels report to it,
chosen once when its log opens), `issuer` (C records: issue.py), `completions` (D records and
the in-flight table), `live` (live mode's tables) and `records` (every other record:
process_records.py). What the per-call code asks of the engine it asks without a branch on which
engine runs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable

import torch

from ..base.settings import Settings
from ..logfile import format as lf
from ..logfile.checkpoint import checkpoint_record
from ..logfile.records import header_record, stop_record
from ..logfile.writer import LogWriter, open_exclusive
from .completions import Completions
from .engine_python import PythonEngine
from .issue import ApiCall, Issuer, ThreadState
from .live import tables as live_hash
from .native import fastpath
from .process_records import ProcessRecords

_C = torch._C._distributed_c10d
ENQUEUE_FUTURES = frozenset({"nccl", "xccl", "simnccl"})  # backends whose Work futures complete at enqueue
__all__ = ["ApiCall", "Recorder", "ThreadState"]


class _Switch:
    """Recorder.active: setting it starts or pauses recording (the compiled kernels, the Python
    kernels: watch_active); reading it is an instance attribute read, which the kernels and
    wrappers do per call (a descriptor with __set__ alone: reads find the instance's value)."""

    def __set__(self, rec: Recorder, value: bool) -> None:
        rec.__dict__["active"] = value
        rec.engine.set_enabled(bool(value))  # the C++ kernels skip the GIL entirely while paused
        if rec._active_watcher is not None:
            try:
                rec._active_watcher(bool(value))
            except Exception as exc:  # noqa: BLE001 - never break the job: stop recording instead
                rec.fail(exc)  # (its warning names the line that set `active`)


class Recorder:
    active = _Switch()  # a log is open and nothing has failed

    def __init__(self, config: Settings):
        self.config = config
        self.writer: LogWriter | None = None
        self.engine = PythonEngine()  # the compiled kernels' NativeEngine once they report here (use_engine)
        self.compiled = False  # whether they do (read it; use_engine sets it)
        self._active_watcher: Callable[[bool], None] | None = None  # watch_active
        self.active = False
        self.failed = False
        self.tls = ThreadState()  # read it; set_api_call writes its ApiCall
        self.t0 = time.monotonic_ns()
        self.completions = Completions(self.now_us, self.engine)
        self.live = live_hash.LiveTables(self.engine)
        self.issuer = Issuer(self)
        self.records = ProcessRecords(self)
        self._group_names: dict[str, int] = {}
        self._threads: dict[int, int] = {}
        self._api_calls = 0
        self.backward_passes = 0  # backward passes started (count_backward_pass): DDP's bucket k is per pass
        self._checkpointed = -1  # collectives issued at the last checkpoint (P record)
        self._in_call: tuple | None = None  # (API, t_ns) of a group creation it waits in (waiting_in)
        self.rank = None
        self._on_polled_group: Callable[[], None] | None = None  # on_polled_group
        # what the kernels, the wrappers and the compiled path's hooks call, each its collaborator's own
        issuer, records = self.issuer, self.records
        self.on_issue, self.on_return, self.on_backend_issue = issuer.on_issue, issuer.on_return, issuer.on_backend_issue
        self.template, self.emit, self.dtype_name = issuer.template, issuer.emit, issuer.dtype_name
        self.record, self.record_exception, self.record_group = records.record, records.record_exception, \
            records.record_group
        self.record_non_member, self.on_sync, self.note_source = records.record_non_member, records.on_sync, \
            records.note_source
        self.on_optimizer_step = records.on_optimizer_step

    def watch_active(self, callback: Callable[[bool], None]) -> None:
        """Call `callback(on)` whenever recording starts or stops (dispatcher.py: the Python
        kernels come and go)."""
        self._active_watcher = callback

    def on_polled_group(self, callback: Callable[[], None]) -> None:
        """Call `callback()` when a group whose completions are polled appears (session.py: the poller
        starts then, and only on such jobs)."""
        self._on_polled_group = callback

    def use_engine(self, engine) -> None:
        """Record through `engine` from now on (fastpath.attach: the compiled kernels' NativeEngine when
        they report to this recorder, a fresh PythonEngine when a later recorder took them). Chosen
        once per log, before its first collective; its collaborators keep their shared state there."""
        self.engine = engine
        self.compiled = engine.compiled
        self.completions.use_engine(engine)
        self.live.use_engine(engine)
        self._set_polling()
        engine.attach(self)

    def set_api_call(self, call: ApiCall | None) -> None:
        """The outermost `dist.*` call now running on this thread, None once it returned (torch_api.py)."""
        self.tls.api = call
        self.engine.set_api(call is not None)  # the compiled kernels keep it per thread in C++

    def count_backward_pass(self) -> None:
        """A backward pass starts (dispatcher._patch_backward): DDP bucket k is per pass."""
        self.backward_passes += 1
        self.engine.set_epoch(self.backward_passes)

    @property
    def in_call(self) -> tuple | None:
        """(API, t_ns) of the group creation this process waits in, or None (live/publisher.py)."""
        return self._in_call

    @contextlib.contextmanager
    def waiting_in(self, api: str, start_ns: int):
        """While a group creation that waits for every rank runs (torch_api.py)."""
        self._in_call = (api, start_ns)
        try:
            yield
        finally:
            self._in_call = None

    # -- lifecycle ------------------------------------------------------------------
    def open(self, rank: int, world_size: int, backend: str, run_id: str | None = None) -> None:
        """Create this rank's log; called when init_process_group has made the rank known.
        `run_id`: the run's name the ranks agreed on (session._run_id), else the settings'."""
        if self.writer is not None:
            return
        cfg = self.config
        run_id = run_id or cfg.resolved_run_id()
        restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)
        fd, path = open_exclusive(os.path.join(cfg.directory, run_id), f"rank-{rank:05d}.{restart}")
        self.writer = LogWriter(fd, path, fastpath.writer_lock(), max_bytes=int(cfg.max_mb * 1024 * 1024))
        self.writer.snapshot_records = self._counters
        self.writer.on_stop = self._write_failed
        self.writer.clock = self.now_us
        self.rank = rank
        header = header_record(
            rank, world_size, run_id, torch=torch.__version__, python=sys.version.split()[0], backend=backend,
            launch=cfg.launch, restart=restart, host=socket.gethostname(),
            cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            threads=torch.get_num_threads(), pid=os.getpid(), argv=list(sys.argv),
            wall_ns=time.time_ns() - (time.monotonic_ns() - self.t0),  # both clocks at the origin of `ts`
            mono_ns=self.t0, stack="full" if cfg.full_stack else "site", hang_s=cfg.hang_seconds,
            **({"poll_ms": cfg.poll_ms} if self._will_poll(backend) else {}))
        with self.writer.lock:
            self.writer.write(header)
        self.active = True

    def fail(self, exc: BaseException) -> None:
        """Internal error: stop recording for good, say so once, never break the job. A record
        the compiled path could not write is the disk's doing: the writer says so (stop)."""
        if self.failed:
            return
        w = self.writer
        code = getattr(w.counters, "error", 0) if w is not None else 0
        if code:  # (WriterLock.error: the errno of the compiled path's failed write)
            with w.lock:
                w.stop(OSError(code, os.strerror(code)))
            self._write_failed(w.stopped or os.strerror(code))
            return
        self._stop_recording(f"recording disabled after an internal error: {exc!r}")
        try:
            if w is not None:
                with w.lock:
                    w.write(stop_record(repr(exc), ts=self.now_us()))
        except Exception:
            pass

    def _write_failed(self, why: str) -> None:
        """The writer could not write the log (LogWriter.stop wrote why, writer lock held): the job
        goes on unrecorded."""
        self._stop_recording(f"recording stopped: could not write {self.writer.path}: {why}; the job goes on "
                             "unrecorded, and its log says where recording stopped")

    def _stop_recording(self, warning: str) -> None:
        if self.failed:
            return
        self.failed = True
        self._active_watcher = None  # maybe called from inside a Python kernel: that stays registered, idle
        self.active = False
        warnings.warn(f"collcheck: {warning}", RuntimeWarning, stacklevel=4)

    def after_fork_in_child(self) -> None:
        """A forked child (DataLoader worker) never writes to its parent's log."""
        self.engine.after_fork_in_child()
        self._active_watcher = None  # the dispatcher's lock may have been held at fork(): registered for good
        self.writer = None
        self.active = False
        self.tls = ThreadState()
        self.completions.after_fork_in_child()
        self._group_names = {}
        self._threads = {}
        self.issuer.after_fork_in_child()
        self._checkpointed = -1
        self.live.reset()

    def now_us(self) -> int:
        return (time.monotonic_ns() - self.t0) // 1000

    # -- ids (writer lock held) -----------------------------------------------------
    def thread_id(self, w: LogWriter) -> int:
        ident = threading.get_ident()
        h = self._threads.get(ident)
        if h is None:
            h = self._threads[ident] = len(self._threads)
            w.keep({"k": lf.THREAD, "h": h, "n": threading.current_thread().name, "id": ident})
        return h

    def group_id(self, w: LogWriter, pg, name: str | None = None) -> int:
        # keyed by name, never holding the group: a reference kept here would stop
        # destroy_process_group() from joining gloo's threads before interpreter exit (abort)
        if name is None:
            name = pg.group_name
        gid = self._group_names.get(name)
        if gid is None:
            if pg is None:  # the fast path passes the group with the first record of a template only
                pg = _C._resolve_process_group(name)
            gid = self._group_names[name] = len(self._group_names)
            rec = {"k": lf.GROUP, "op": "seen", "gid": gid, "g": name, "d": getattr(pg, "group_desc", "")}
            ranks = _group_ranks(pg)
            if ranks is not None:
                rec["r"] = ranks
                self.live.set_members(gid, ranks)
            enqueue = self._enqueue_futures(pg)
            if enqueue or self.config.completion == "poll":
                rec["cp"] = 1
                self.completions.polled_groups[name] = enqueue
                self._set_polling()
                if self._on_polled_group is not None:
                    self._on_polled_group()
            w.keep(rec)
        return gid

    def _will_poll(self, backend: str) -> bool:
        """Whether the job's default backend (get_backend_config(): "nccl", "cpu:gloo,cuda:nccl") has
        its completions polled: the header then says how often (reports give the times' resolution)."""
        return self.config.completion == "poll" or any(
            part.rpartition(":")[2].strip().lower() in ENQUEUE_FUTURES for part in str(backend).split(","))

    def _set_polling(self) -> None:
        """Tell the compiled kernels which Works to keep for the poller: every one (poll), NCCL's
        once a group whose futures complete at enqueue exists, else none (no per-call check at all)."""
        polled = self.config.completion == "poll" or any(self.completions.polled_groups.values())
        self.engine.set_polling(1 if self.config.completion == "poll" else 0 if polled else -1)

    def _enqueue_futures(self, pg) -> bool:
        """Whether this group's backend completes its futures at enqueue (NCCL): its collectives'
        completions are polled (completions.py)."""
        try:
            name = pg.getBackendName() if hasattr(pg, "getBackendName") else pg._get_backend_name()
        except Exception:  # noqa: BLE001 - a group without a backend name: its futures are trusted
            return False
        return str(name).lower() in ENQUEUE_FUTURES

    def events_issued(self) -> int:
        """Collectives recorded so far (their event ids go from 0)."""
        return self.engine.peek_eid()

    def _counters(self) -> list[dict]:
        """J record for a new segment: the last `j` of every group and channel (writer lock held)."""
        return [{"k": lf.COUNTERS, "c": [list(kv) for kv in self.engine.seqs()]}]

    # -- completions and state (completions.py, live/tables.py) -------------------------
    def on_backend_return(self, eid: int, work) -> None:
        """The op of a backend written in Python returned `work` (collcheck.simnccl): polled."""
        self.completions.keep_polled(eid, self.now_us(), work)

    def poll_completions(self) -> int:
        """One polling round (poller.py): completions seen are written out at once; returns how many
        Works are still kept."""
        left = self.completions.poll()
        w = self.writer
        if self.completions.has_queued() and w is not None:
            with w.lock:
                self.completions.drain(w)
        return left

    def finish(self, eid: int, t_ret: int, error: BaseException | None = None) -> None:
        """Op `eid` returned at `t_ret` and has completed now, or failed with `error`."""
        self.completions.finish(self.writer, eid, t_ret, error)

    def drain_completions(self) -> None:
        """Turn completions observed since the last call into D records (writer lock held)."""
        self.completions.drain(self.writer)

    def inflight_items(self) -> list:
        """[(eid, (t_issue_ns, thread ident, op))] of the collectives not completed yet."""
        return self.completions.items()

    def checkpoint(self, why: str) -> None:
        """P record (logfile/checkpoint.py): every group's and channel's count and rolling hash, the
        collectives not completed and those that raised; completions seen so far written first."""
        w = self.writer
        if w is None:
            return
        with w.lock:
            self.completions.drain(w)
            if self.events_issued() != self._checkpointed:  # (else the last one still holds: what came
                self.write_checkpoint(why)                 # since, completions..., follows it)

    def write_checkpoint(self, why: str) -> dict:
        """Write a P record now and return it (writer lock held, completions drained): live mode's
        answer to a request for the logs ends the log with one (capture/live/share.py)."""
        w = self.writer
        self._checkpointed = issued = self.events_issued()
        seqs = dict(self.engine.seqs())
        hashes = self.live.hashes()
        sequences = [(k, j + 1, hashes.get(k, 0)) for k, j in seqs.items()]
        open_eids = [eid for eid, _ in self.completions.items()]
        record = checkpoint_record(issued, sequences, why, open_eids, self.completions.failed, w.vocabulary(),
                                   self.issuer.sizes)
        w.write(record)
        return record

    def live_state(self) -> dict:
        """What live/publisher.py publishes (writer lock held): LiveTables.state."""
        return self.live.state(self._group_names, dict(self.engine.seqs()))

    def next_api_call(self) -> int:
        self._api_calls += 1
        return self._api_calls


def _group_ranks(pg):
    try:
        from torch.distributed import distributed_c10d as c10d

        ranks = c10d._world.pg_group_ranks.get(pg)
        if ranks is not None:
            return sorted(ranks, key=lambda g: ranks[g])
    except Exception:
        pass
    return None
