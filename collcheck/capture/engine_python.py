"""The state the recording kernels share, kept in Python: the engine of the pure-Python path.

A recorder numbers its events, counts each group's (and P2P channel's) collectives, numbers DDP's
gradient buckets, keeps the in-flight table and mixes live mode's hashes through one engine object,
chosen once when its log opens (the way coverage.py picks a CTracer or a PyTracer): this one, or
engine_native.NativeEngine, which keeps the same state in the compiled kernels (fastpath.cpp) so
that the records they write themselves and those Python writes share it. Both have the same
methods; the per-call code calls them without asking which engine runs.
"""

from __future__ import annotations

from .live import tables as live_hash


class PythonEngine:
    """Event ids, sequence numbers, bucket numbering, in-flight table and live hashes, in Python."""

    compiled = False  # the compiled kernels write records themselves (NativeEngine)

    def __init__(self):
        self._eid = 0
        self._seqs: dict[int, int] = {}  # format.seq_key -> its last `j`
        self._last_in_group: dict[int, int] = {}  # gid -> eid of its latest event
        self._bucket: dict[int, tuple] = {}  # gid -> (backward epoch, eid, bucket index)
        self._inflight: dict[int, tuple[int, int, str]] = {}  # eid -> (t_ns, thread ident, op)
        self._hashes: dict[int, list] = {}  # seq_key -> [rolling hash, ring of signatures]

    def attach(self, rec) -> None:
        """Start reporting to `rec` (Recorder.use_engine): nothing to hand over in Python."""

    def after_fork_in_child(self) -> None:
        """A forked child: none of the parent's counters or collectives are its own."""
        self.__init__()

    # -- counters (writer lock held) ------------------------------------------------------
    def next_eid(self) -> int:
        eid = self._eid
        self._eid = eid + 1
        return eid

    def peek_eid(self) -> int:
        """Collectives recorded so far (their event ids go from 0)."""
        return self._eid

    def next_seq(self, key: int) -> int:
        """The `j` of the next collective of a group or P2P channel (logfile.format.seq_key)."""
        j = self._seqs.get(key, -1) + 1
        self._seqs[key] = j
        return j

    def seqs(self) -> list[tuple[int, int]]:
        """[(seq_key, last j)]: checkpoints, a new segment's J record, live mode."""
        return list(self._seqs.items())

    def label_state(self, gid: int, eid: int, bucket: bool, epoch: int) -> int:
        """The index of gradient bucket `eid` in its pass (-1: not a bucket). epoch -1: not numbered
        per backward pass (join's shadow passes): it goes on when the group's last event was the
        last bucket. The compiled engine keeps the same state (fastpath.cpp, label_state)."""
        last = self._last_in_group.get(gid)
        self._last_in_group[gid] = eid
        if not bucket:
            return -1
        prev = self._bucket.get(gid)
        go_on = prev is not None and prev[0] == epoch and (epoch >= 0 or prev[1] == last)
        index = prev[2] + 1 if go_on else 0
        self._bucket[gid] = (epoch, eid, index)
        return index

    def mix(self, seq: int, j: int, sig: int) -> None:
        """Collective `j` of `seq` with signature `sig` goes into its rolling hash (live/tables.py)."""
        live_hash.mix(self._hashes, seq, j, sig)

    def live(self) -> list[tuple[int, int, list[int]]]:
        """[(seq_key, rolling hash, ring of signatures)]."""
        return [(k, st[0], st[1]) for k, st in self._hashes.items()]

    # -- in-flight table and completions ---------------------------------------------------
    def track(self, eid: int, t_ns: int, ident: int, op: str) -> None:
        self._inflight[eid] = (t_ns, ident, op)

    def forget(self, eid: int) -> None:
        self._inflight.pop(eid, None)

    def inflight(self) -> list:
        """[(eid, (t_issue_ns, thread ident, op))] of the collectives not completed yet."""
        return list(self._inflight.items())

    def take_done(self) -> None:
        """Completions the engine observed itself (the Python kernels' go to Completions' queue)."""
        return None

    def has_done(self) -> bool:
        return False

    def poll(self, batch: int) -> int:
        """Works the engine keeps for polling itself: none (Completions keeps the Python path's)."""
        return 0

    # -- what the compiled kernels are told; nothing to tell here ---------------------------
    def set_enabled(self, on: bool) -> None:
        """Recording starts or pauses (the Python kernels come and go through Recorder.watch_active)."""

    def set_api(self, active: bool) -> None:
        """An API call starts or ends on this thread (the Python kernels read the recorder's ThreadState)."""

    def set_epoch(self, epoch: int) -> None:
        """A backward pass starts (the Python path reads Recorder's epoch at each record)."""

    def set_polling(self, mode: int) -> None:
        """Which Works to keep for the poller (Completions keeps the Python path's)."""
