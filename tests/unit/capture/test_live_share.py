"""Live mode's logs through the store (capture/live/share.py, gather.py), in process, through a real
TCPStore: each rank's log as it stands (its queued records written first) comes out whole in a
private folder the checker names, or its newest segments past the cap; a rank that does not answer
is missing and said; a log a rank left when it closed it is taken; a publisher that was asked
nothing reads one key a turn; what the store holds is data: a hostile manifest or chunk leaves no
file, never names a path, and is never read past the caps."""

from __future__ import annotations

import datetime
import json
import os
import zlib

import msgpack
import pytest
from torch.distributed import PrefixStore, TCPStore

from collcheck.analysis.diff import analyse
from collcheck.base.settings import Settings
from collcheck.capture.live import gather, share
from collcheck.capture.live.keys import (
    NO_REQUEST,
    REQUEST_KEY,
    SIGNAL_KEY,
    answer_keys,
    arrival_keys,
    final_keys,
    kind_key,
)
from collcheck.capture.live.publisher import Publisher
from collcheck.capture.recorder import Recorder
from collcheck.cli.live import judge
from collcheck.logfile import format as lf
from collcheck.logfile.checkpoint import signature
from collcheck.logfile.reader import parse_header, read_bytes
from collcheck.logfile.tail import read_tail, tail_of
from collcheck.model import load, load_run

TIMEOUT = datetime.timedelta(seconds=10)


@pytest.fixture(scope="module")
def client():
    """A real TCPStore served in this process and a client of it (a rank's clone): one of each for
    the module (the server looks up each connection's peer, which a slow resolver stalls 5 s)."""
    server = TCPStore("127.0.0.1", 0, None, True, wait_for_workers=False, timeout=TIMEOUT)
    connected = TCPStore("127.0.0.1", server.port, None, False, timeout=TIMEOUT)
    yield connected
    del connected, server


@pytest.fixture
def store(client, request):
    """The client, its keys under a prefix of the test's own, as the job's store is under the
    default group's."""
    return PrefixStore(request.node.name, client)


def live_rank(directory, rank: int, world: int, calls: int, max_mb: float = 64.0, unwritten: bool = False,
              odd: int | None = None) -> Recorder:
    """A recorder's log as a running rank has it: its header, the world group, `calls` all_reduces
    (records as the recorder writes them, its counters and rolling hashes advanced as Issuer.emit
    does; with `unwritten`, the last one queued, not yet written; collective `odd` of another shape)."""
    rec = Recorder(Settings(directory=str(directory), run_id="share", max_mb=max_mb))
    rec.open(rank, world, "gloo")
    w = rec.writer
    key = lf.seq_key(0, "allreduce_", None)
    with w.lock:
        site = w.site_id("/job/train.py", 10, "step")
        w.keep({"k": lf.GROUP, "op": "seen", "gid": 0, "g": "0", "d": "default_pg", "r": list(range(world))})
        w.write({"k": lf.GROUP, "op": "init", "ts": 0, "gid": 0, "g": "0", "r": list(range(world)), "s": site})
        for n in range(calls):
            tensors = (("float32", (4, n % 7 + (n == odd))),)
            eid, j = rec.engine.next_eid(), rec.engine.next_seq(key)
            rec.live.mix(key, j, signature("allreduce_", tensors, 0, None), 0, None)
            record = {"k": lf.COLL, "o": w.string_id("allreduce_"), "g": 0, "ts": 10 * j, "j": j, "s": site,
                      "t": w.tspec_id(tensors), "r": 0}
            if unwritten and n == calls - 1:
                w.queue(record)
            else:
                w.write(record, eid)
    return rec


def files_of(folder: str) -> list[str]:
    return sorted(os.listdir(folder))


def test_each_rank_log_comes_through_the_store_whole_into_files_the_checker_names(tmp_path, store):
    ranks = [live_rank(tmp_path / "logs", r, 2, 40 + r, unwritten=r == 1) for r in range(2)]  # (two kinds)
    request = gather.ask(store)
    for rec in ranks:
        assert share.answer(rec, store, request)
        assert not share.answer(rec, store, request)  # (once: the checker on a rank answers for it too)
    snap = gather.gather(store, request, 2, 0, wait_s=5.0)
    try:
        assert files_of(snap.folder) == ["rank-00000.0.msgpack", "rank-00001.0.msgpack"] and snap.notes == []
        for rec in ranks:  # the bytes as they stand, the queued record included
            path = os.path.join(snap.folder, f"rank-{rec.rank:05d}.0.msgpack")
            with open(path, "rb") as f:
                assert f.read() == read_bytes(rec.writer.path)
            assert os.stat(path).st_mode & 0o777 == 0o600
        assert os.stat(snap.folder).st_mode & 0o777 == 0o700
        run = load_run(snap.folder, running={0, 1})
        assert sorted(run.ranks) == [0, 1] and [len(run.ranks[r]) for r in (0, 1)] == [40, 41]
        # the answers and the request are gone from the store, once the checker is done with them
        snap.forget(store, 2)
        keys = [k for r in (0, 1) for k in (answer_keys(request, r)[0], answer_keys(request, r)[1] + "0",
                                            *arrival_keys(request, r + 1))]
        assert not any(store.check([k]) for k in keys)
        assert store.get(REQUEST_KEY) == NO_REQUEST  # (no request pending)
    finally:
        snap.remove()
    assert not os.path.exists(snap.folder)


def shared_run(tmp_path, store, world: int = 8, odd_rank: int = 5):
    """`world` running ranks, `odd_rank` issuing collective #20 of another shape, each answering one
    request: (the ranks, the request, the snapshot)."""
    ranks = [live_rank(tmp_path / "logs", r, world, 30, odd=20 if r == odd_rank else None) for r in range(world)]
    request = gather.ask(store)
    for rec in ranks:
        share.answer(rec, store, request)
    return ranks, request, gather.gather(store, request, world, 0, wait_s=5.0)


def test_ranks_of_one_kind_send_their_whole_log_once_and_the_others_only_its_end(tmp_path, store):
    ranks, request, snap = shared_run(tmp_path, store)
    try:
        # the first of the clean kind and the odd rank (a kind of its own) whole, the others' ends in one file
        assert files_of(snap.folder) == [gather.ENDS_FILE, "rank-00000.0.msgpack", "rank-00005.0.msgpack"]
        assert snap.notes == [] and snap.ends_file == os.path.join(snap.folder, gather.ENDS_FILE)
        ends = gather.read_ends(snap.ends_file, 8)
        assert sorted(ends) == [1, 2, 3, 4, 6, 7]
        for rec in ranks:
            tail = read_tail(rec.writer.path)  # its log ends with the checkpoint it answered with
            assert tail.complete and tail.after == [] and (tail.checkpoint["w"], tail.checkpoint["n"]) == ("share", 30)
            if rec.rank in ends:  # its header, marked, and that checkpoint
                assert parse_header(ends[rec.rank], "end") == {**rec.writer.header, "tail": 1}
                assert tail_of(ends[rec.rank]).checkpoint == tail.checkpoint and len(ends[rec.rank]) < 1024
            else:
                with open(os.path.join(snap.folder, f"rank-{rec.rank:05d}.0.msgpack"), "rb") as f:
                    assert f.read() == read_bytes(rec.writer.path)
        run = load_run(snap.folder, running=set(range(8)), ends=ends)
        assert sorted(run.ranks) == list(range(8)) and {len(log) for log in run.ranks.values()} == {30}
        assert all(run.ranks[r].like is run.ranks[0] for r in (1, 2, 3, 4, 6, 7)) and run.ranks[5].like is None
        assert [r.header.get("tail") for r in run.ranks.values()].count(1) == 6
        kinds = [kind_key(request, share.kind_digest(ranks[r].writer.header, read_tail(ranks[r].writer.path).checkpoint))
                 for r in (0, 5)]
        assert all(store.check([k]) for k in kinds)
        snap.forget(store, 8)
        assert not any(store.check([k]) for k in kinds)  # (the kinds' counters go with the answers)
    finally:
        snap.remove()


def test_the_judge_finds_in_a_share_what_every_log_read_whole_shows(tmp_path, store):
    """The judge's report on the snapshot (logs of the odd rank and of one clean rank whole, the
    others their ends: read by their checkpoints, also in a run too small to be read by kinds
    otherwise) is the analysis of every rank's own log read in full: its finding and rank states."""
    ranks, _, snap = shared_run(tmp_path, store, world=4, odd_rank=2)
    try:
        assert load.FOLD_FROM > 4 and snap.notes == []
        report_dir = tmp_path / "report"
        report_dir.mkdir()
        line = judge(str(report_dir), {"kind": "divergence", "running": list(range(4)), "snapshot": snap.folder,
                                       "logs": snap.notes, "ends": snap.ends_file, "world": 4})
        assert sorted(gather.read_ends(snap.ends_file, 4)) == [1, 3]
    finally:
        snap.remove()
    whole = analyse(load_run(os.path.dirname(ranks[0].writer.path), running=set(range(4))))
    with open(report_dir / "live-report.json") as f:
        shared = json.load(f)
    f0, first = whole.findings[0], shared["live"]["first"]
    assert line is not None and "rank 2" in line
    assert (first["kind"], first["group"], first["position"], first["ranks"], first["message"]) == (
        f0.kind, f0.group, f0.position, list(f0.ranks), f0.message)
    assert (f0.position, list(f0.ranks)) == (20, [2])
    assert {r: s["state"] for r, s in shared["ranks"].items()} == {
        str(r): s.state for r, s in whole.hang.states.items()} and len(shared["ranks"]) == 4
    assert not any("not read" in w for w in shared["warnings"])


def test_a_rank_whose_log_went_on_after_its_last_answer_is_compared_by_its_new_end(tmp_path, store):
    """A second request: each rank ends its log with a new checkpoint; the rank that went on
    (and diverged) since the first is a kind of its own, its log sent whole again."""
    ranks, _, snap = shared_run(tmp_path, store, odd_rank=-1)
    snap.remove()
    assert snap.notes == []
    rec = ranks[6]
    key = lf.seq_key(0, "allreduce_", None)
    with rec.writer.lock:  # one more collective on rank 6 alone
        eid, j = rec.engine.next_eid(), rec.engine.next_seq(key)
        rec.live.mix(key, j, signature("allreduce_", (("float32", (9,)),), 0, None), 0, None)
        rec.writer.write({"k": lf.COLL, "o": rec.writer.string_id("allreduce_"), "g": 0, "ts": 999, "j": j,
                          "s": 0, "t": rec.writer.tspec_id((("float32", (9,)),)), "r": 0}, eid)
    request = gather.ask(store)
    for r in ranks:
        share.answer(r, store, request)
    snap = gather.gather(store, request, 8, 0, wait_s=5.0)
    try:
        assert sorted(snap.ends) == [1, 2, 3, 4, 5, 7]  # (rank 0 and 6 whole)
        run = load_run(snap.folder, running=set(range(8)), ends=gather.read_ends(snap.ends_file, 8))
        assert len(run.ranks[6]) == 31 and run.ranks[6].like is None and run.ranks[7].like is run.ranks[0]
        assert {len(run.ranks[r]) for r in range(8) if r != 6} == {30}
    finally:
        snap.remove()


def test_a_log_that_cannot_end_with_a_checkpoint_now_is_sent_whole(tmp_path, store):
    """Recording paused (or the log over its cap, or the disk full): no checkpoint is written, the
    log goes whole as it stands, whatever the others of its kind sent."""
    ranks = [live_rank(tmp_path / "logs", r, 8, 10) for r in range(3)]
    ranks[1].active = False
    request = gather.ask(store)
    for rec in ranks:
        share.answer(rec, store, request)
    snap = gather.gather(store, request, 3, 0, wait_s=0.5)  # (the ranks 3-7 do not answer here)
    try:
        for rec in ranks[:2]:
            with open(os.path.join(snap.folder, f"rank-{rec.rank:05d}.0.msgpack"), "rb") as f:
                assert f.read() == read_bytes(rec.writer.path)
        assert read_tail(ranks[1].writer.path) is None  # (no checkpoint written while paused)
        assert sorted(snap.ends) == [2]
    finally:
        snap.remove()


def test_a_log_over_the_cap_sends_its_newest_segments_which_read_on_their_own(tmp_path, store, monkeypatch):
    rec = live_rank(tmp_path / "logs", 0, 1, 4000, max_mb=0.1)  # segments of 16 KiB, the oldest deleted past 0.1 MB
    parts = rec.writer.parts()
    assert len(parts) > 4 and parts[0][1] == 0 and parts[1][1] > 1  # (the first file, later ones, some deleted)
    most = parts[-1][2] + parts[-2][2] + parts[-3][2] + 10
    monkeypatch.setattr(share, "LOG_CAP", most)
    request = gather.ask(store)
    share.answer(rec, store, request)
    snap = gather.gather(store, request, 1, 0, wait_s=5.0)
    try:
        with open(os.path.join(snap.folder, "rank-00000.0.msgpack"), "rb") as f:
            data = f.read()
        newest = b""
        for path, _, _ in parts[-3:]:
            with open(path, "rb") as f:
                newest += f.read()
        assert data == newest
        first, last = parts[-3][1], parts[-1][1]
        assert len(snap.notes) == 1 and f"newest {len(newest) / (1 << 20):.1f} MiB" in snap.notes[0]
        assert f"segments {first}-{last}" in snap.notes[0]
        run = load_run(snap.folder, running={0})
        assert run.ranks[0].header["rank"] == 0 and len(run.ranks[0]) > 0
    finally:
        snap.remove()


def test_a_rank_that_does_not_answer_is_missing_and_said_and_its_late_answer_deleted(tmp_path, store):
    ranks = [live_rank(tmp_path / "logs", r, 3, 5 + r) for r in range(3)]  # (three kinds: each log whole)
    request = gather.ask(store)
    for rec in ranks[:2]:
        share.answer(rec, store, request)
    snap = gather.gather(store, request, 3, 0, wait_s=0.3)
    snap.remove()
    assert snap.late == [2] and len(snap.notes) == 1 and snap.notes[0].startswith("rank 2: its log did not come")
    share.answer(ranks[2], store, request)  # after the checker stopped waiting
    key, prefix = answer_keys(request, 2)
    count, slot = arrival_keys(request, 3)
    late_kind = kind_key(request, share.kind_digest(ranks[2].writer.header, read_tail(ranks[2].writer.path).checkpoint))
    assert store.check([key, prefix + "0", slot, late_kind])
    snap.forget(store, 3)
    assert not any(store.check([k]) for k in (key, prefix + "0", count, slot, arrival_keys(request, 1)[1], late_kind))


def test_the_log_a_rank_left_when_it_closed_it_is_taken_and_one_of_another_restart_is_not(tmp_path, store):
    ranks = [live_rank(tmp_path / "logs", r, 2, 6) for r in range(2)]
    ranks[1].writer.close()
    share.leave(ranks[1], store)
    first = msgpack.unpackb(store.get(final_keys(1, None)[0]))["gen"]
    share.leave(ranks[1], store)  # (a later log of the process: in place of the first one)
    assert not store.check([final_keys(1, first)[1] + "0"])
    request = gather.ask(store)
    share.answer(ranks[0], store, request)
    snap = gather.gather(store, request, 2, 0, wait_s=5.0)
    try:
        assert files_of(snap.folder) == ["rank-00000.0.msgpack", "rank-00001.0.msgpack"] and snap.notes == []
        with open(os.path.join(snap.folder, "rank-00001.0.msgpack"), "rb") as f:
            assert f.read() == read_bytes(ranks[1].writer.path)
    finally:
        snap.remove()
    request = gather.ask(store)
    share.answer(ranks[0], store, request)
    snap = gather.gather(store, request, 2, 1, wait_s=0.3)  # a checker of restart 1: rank 1's log is stale
    snap.remove()
    assert snap.late == [1]


class Counting:
    """A store that counts the requests made of it."""

    def __init__(self, store):
        self.store, self.calls = store, []

    def __getattr__(self, name):
        def call(*args):
            self.calls.append(name)
            return getattr(self.store, name)(*args)
        return call


def test_a_publisher_reads_one_key_a_turn_while_nothing_is_asked_and_answers_a_request(tmp_path, store):
    rec = live_rank(tmp_path / "logs", 1, 2, 5)
    counting = Counting(store)
    p = Publisher(lambda: rec, counting, 1, 0.5)
    p.react(rec)  # the first turn reads every key once
    counting.calls.clear()
    for _ in range(3):
        p.react(rec)
    assert counting.calls == ["add", "add", "add"]
    request = gather.ask(store)
    p.react(rec)
    assert store.check([answer_keys(request, 1)[0]])  # answered at its next turn
    counting.calls.clear()
    p.react(rec)
    assert counting.calls == ["add"]
    assert int(store.add(SIGNAL_KEY, 0)) == p.signal


def _hostile(store, request: int, rank: int, manifest, chunks=()) -> None:
    """An answer as a rank sends it (its chunks, its manifest, its arrival), its values any."""
    key, prefix = answer_keys(request, rank)
    for i, value in enumerate(chunks):
        store.set(f"{prefix}{i}", value)
    store.set(key, manifest if isinstance(manifest, bytes) else msgpack.packb(manifest))
    count, _ = arrival_keys(request, 0)
    store.set(arrival_keys(request, store.add(count, 1))[1], str(rank))


def _good(data: bytes, **changes) -> dict:
    import hashlib

    m = {"v": 1, "rank": 0, "restart": 0, "size": len(data), "chunks": -(-len(data) // share.CHUNK), "log": len(data),
         "hash": hashlib.blake2b(data, digest_size=16).hexdigest(), "parts": [[0, len(data)]]}
    m.update(changes)
    return m


DATA = b"\x00collcheck" * 1000
BOMB = zlib.compress(b"\x00" * (share.CHUNK + 1), 9)  # (4 KiB that decompress past a chunk)
HOSTILE = {
    "not msgpack": (b"\xc1\xc1", [zlib.compress(DATA)]),
    "not a map": (msgpack.packb([1, 2, 3]), [zlib.compress(DATA)]),
    "too large": (msgpack.packb(_good(DATA, pad="x" * (1 << 17))), [zlib.compress(DATA)]),
    "a huge size": (_good(DATA, size=1 << 40, chunks=(1 << 40) // share.CHUNK), [zlib.compress(DATA)]),
    "chunks that do not add up": (_good(DATA, chunks=1 << 30), [zlib.compress(DATA)]),
    "another rank": (_good(DATA, rank=1), [zlib.compress(DATA)]),
    "a size smaller than the chunk": (_good(DATA, size=100, parts=[[0, 100]]), [zlib.compress(DATA)]),
    "a size larger than the chunk": (_good(DATA, size=len(DATA) + 1, parts=[[0, len(DATA) + 1]]),
                                     [zlib.compress(DATA)]),
    "a wrong hash": (_good(DATA, hash="0" * 32), [zlib.compress(DATA)]),
    "a missing chunk": (_good(DATA), []),
    "a damaged chunk": (_good(DATA), [b"not zlib at all"]),
    "a chunk that decompresses past its size": (_good(b"\x00" * share.CHUNK), [BOMB]),
    "an oversized chunk": (_good(DATA), [b"\x00" * (gather.MAX_STORED + 1)]),
    "names as paths": (_good(DATA, parts=[["../../evil", len(DATA)]], name="../../../tmp/evil", path="/etc/passwd",
                             files=[["../x", 1], ["a/b", 2]]), [zlib.compress(DATA)]),
    "a negative restart": (_good(DATA, restart=-1), [zlib.compress(DATA)]),
    "a restart as a path": (_good(DATA, restart="../../x"), [zlib.compress(DATA)]),
    "an end that is no bytes": ({"v": 1, "rank": 0, "restart": 0, "log": 10, "tail": "../x"}, []),
    "an end of another rank": ({"v": 1, "rank": 1, "restart": 0, "log": 10, "tail": DATA}, []),
    "an end past its cap": ({"v": 1, "rank": 0, "restart": 0, "log": 10, "tail": b"x" * (share.MAX_END + 1)}, []),
    "an empty end": ({"v": 1, "rank": 0, "restart": 0, "log": 10, "tail": b""}, []),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_answer_leaves_no_file_and_names_no_path(tmp_path, store, case, monkeypatch):
    manifest, chunks = HOSTILE[case]
    monkeypatch.chdir(tmp_path)
    before = set(os.listdir(tmp_path))
    request = gather.ask(store)
    _hostile(store, request, 0, manifest, chunks)
    snap = gather.gather(store, request, 1, 0, wait_s=2.0)
    try:
        assert files_of(snap.folder) == [], case
        assert len(snap.notes) == 1, snap.notes
        assert snap.notes[0].startswith("rank 0: what it sent through the store was not a log"), snap.notes
        assert set(os.listdir(tmp_path)) == before and not os.path.exists("/tmp/evil")
        snap.forget(store, 1)
        assert not store.check([answer_keys(request, 0)[0]])  # deleted all the same
    finally:
        snap.remove()


def test_the_names_a_manifest_holds_are_never_paths_even_when_it_is_whole(tmp_path, store):
    """A good log whose manifest also carries names: written under the checker's own name."""
    rec = live_rank(tmp_path / "logs", 0, 1, 3)
    data = read_bytes(rec.writer.path)
    request = gather.ask(store)
    _hostile(store, request, 0, _good(data, name="../../../evil.msgpack", parts=[[0, len(data)]]),
             [zlib.compress(data)])
    snap = gather.gather(store, request, 1, 0, wait_s=2.0)
    try:
        assert files_of(snap.folder) == ["rank-00000.0.msgpack"] and snap.notes == []
    finally:
        snap.remove()


def test_a_hostile_arrival_counter_and_slots_are_read_within_bounds(tmp_path, store):
    """A counter far past the world and slots that name no rank: a bounded look, the rank missing."""
    request = gather.ask(store)
    count, _ = arrival_keys(request, 0)
    store.add(count, 1 << 40)
    for i, value in enumerate((b"../../x", b"-1", b"99999999999", b"7"), 1):
        store.set(arrival_keys(request, i)[1], value)
    snap = gather.gather(store, request, 2, 0, wait_s=0.2)
    try:
        assert files_of(snap.folder) == [] and snap.late == [0, 1]
        assert snap.seen == 4  # (never more than twice the world: the rest of the counter is not read)
    finally:
        snap.remove()


def test_a_left_log_whose_generation_is_not_a_number_is_refused(tmp_path, store):
    key, _ = final_keys(0, None)
    store.set(key, msgpack.packb(_good(DATA, gen="../x")))
    request = gather.ask(store)
    snap = gather.gather(store, request, 1, 0, wait_s=1.0)
    snap.remove()
    assert snap.notes and "not a log of it" in snap.notes[0]


def test_arrivals_are_read_up_to_the_first_slot_not_written_yet_in_a_few_requests(store):
    """A rank counted among the answers that has not written its slot yet ends what is read at
    this look (the rest at the next one), found by halving: a few checks, not one per slot."""
    keys = [f"slot/{i}" for i in range(1200)]
    for i, k in enumerate(keys):
        if i != 700:
            store.set(k, str(i))
    counting = Counting(store)
    got = gather._written(counting, keys)
    assert got == [str(i).encode() for i in range(700)]
    assert counting.calls.count("check") <= 2 + 10 and counting.calls.count("multi_get") == 2
    store.set(keys[700], "700")
    assert gather._written(store, keys[700:]) == [str(i).encode() for i in range(700, 1200)]
    assert gather._written(store, []) == []


def test_a_log_whose_checkpoint_starts_a_new_segment_is_sent_whole(tmp_path, store):
    """The checkpoint written for the answer fills the segment: the log's last frames are the new
    segment's, not the checkpoint; the log goes whole, not as an end of its kind."""
    ranks = [live_rank(tmp_path / "logs", r, 8, 20, max_mb=1.0) for r in range(2)]
    counters = ranks[1].writer.counters
    counters.segment_bytes = counters.written + 1  # (its next frame fills the segment)
    request = gather.ask(store)
    for rec in ranks:
        share.answer(rec, store, request)
    snap = gather.gather(store, request, 2, 0, wait_s=0.3)
    try:
        assert ranks[1].writer.segment == 1 and snap.ends == {}
        assert files_of(snap.folder) == ["rank-00000.0.msgpack", "rank-00001.0.msgpack"]
    finally:
        snap.remove()
