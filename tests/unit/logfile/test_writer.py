"""The log writer (collcheck/logfile/writer.py): bounded logs in segments, each readable on its
own; room allocated ahead, so a write that fails (a file size limit, no file left) still leaves
the record saying why recording stopped."""

from __future__ import annotations

import os

from collcheck.logfile import format as lf
from collcheck.logfile.writer import RESERVE, LogWriter, open_exclusive
from collcheck.logfile.reader import read_log, segment_paths


def test_segments_read_on_their_own(tmp_path):
    fd, path = open_exclusive(str(tmp_path), "rank-00000.0")
    w = LogWriter(fd, path, max_bytes=200_000)
    header = {"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "rank": 0, "world": 1, "run": "r"}
    with w.lock:
        w.write(header)
        w.keep({"k": lf.GROUP, "op": "seen", "gid": 0, "g": "0", "r": [0]})
        for i in range(20_000):
            site = w.site_id("/x/train.py", 10 + i % 50, "step")
            w.write({"k": lf.COLL, "o": w.string_id("allreduce_"), "g": 0, "ts": i, "s": site, "j": i}, i)
    parts = w.parts()  # (open: what live mode sends, as it stands)
    w.close()
    segs = segment_paths(path)
    # the log's files in order, with their sizes (live mode's share.py): the same after close
    assert w.parts() == parts == [(p, int(p.rsplit(".", 1)[1]) if p != path else 0, os.path.getsize(p))
                                  for p in [path, *segs]]
    total = os.path.getsize(path) + sum(os.path.getsize(s) for s in segs)
    assert int(segs[0].rsplit(".", 1)[1]) > 1  # the oldest later segments were deleted ...
    assert os.path.exists(path) and total <= 200_000 + w.counters.segment_bytes + 4096  # ... the first kept
    for seg in segs:  # each segment: the header, every string, site and group its records need
        raw = read_log(seg)
        assert raw.header["seg"] == int(seg.rsplit(".", 1)[1]) and not raw.damage and not raw.torn
        strings = {r["i"] for r in raw.records if r["k"] == "S"}
        sites = {r["i"] for r in raw.records if r["k"] == "F"}
        colls = [r for r in raw.records if r["k"] == "C"]
        assert colls and all(c["o"] in strings and c["s"] in sites for c in colls)
        assert any(r["k"] == "G" and r["gid"] == 0 for r in raw.records)


# -- a write that fails: the Q record in the room kept for it ------------------------------------

# A process of its own writes a log under a kernel limit: RLIMIT_FSIZE (a write past it fails with
# EFBIG, SIGXFSZ ignored) or RLIMIT_NOFILE (no new segment file: EMFILE). It prints what the
# writer told its recorder (on_stop) and the room it had kept when the error came.
LIMITED = """
import json, os, resource, signal, sys
from collcheck.logfile import format as lf
from collcheck.logfile.writer import LogWriter, open_exclusive

what, limit, directory, max_bytes = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
fd, path = open_exclusive(directory, "rank-00000.0")
w = LogWriter(fd, path, max_bytes=max_bytes)
stops, room = [], []
w.on_stop = lambda why: (stops.append(why), room.append(w.counters.allocated - w.counters.written))
w.clock = lambda: 123
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
if what == "fsize":
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
header = {"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "rank": 0, "world": 1, "run": "r"}
with w.lock:
    w.write(header)
    w.keep({"k": lf.GROUP, "op": "seen", "gid": 0, "g": "0", "r": [0]})
    if what == "nofile":  # this process's files as they are: the next segment cannot be opened
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) - 1, 4096))  # (less listdir's)
    for i in range(20_000):
        site = w.site_id("/x/train.py", 10 + i % 50, "step")
        w.write({"k": lf.COLL, "o": w.string_id("allreduce_"), "g": 0, "ts": i, "s": site, "j": i}, i)
w.close()
print(json.dumps({"stops": stops, "room": room, "path": path}))
"""


def _limited(tmp_path, what: str, limit: int, max_bytes: int = 0) -> dict:
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LIMITED, what, str(limit), str(tmp_path), str(max_bytes)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_a_log_past_the_file_size_limit_ends_with_why_recording_stopped(tmp_path):
    out = _limited(tmp_path, "fsize", 100_000)
    assert out["stops"] == ["File too large (EFBIG)"] and 0 <= out["room"][0] < RESERVE  # (written into the room)
    path = out["path"]
    raw = read_log(path)
    assert not raw.damage and not raw.torn and os.path.getsize(path) <= 100_000
    last = raw.records[-1]
    assert last == {"k": lf.DISABLED, "m": "could not write the log: File too large", "e": "EFBIG", "ts": 123}
    colls = [r for r in raw.records if r["k"] == lf.COLL]
    assert 1000 < len(colls) < 20_000 and [c["j"] for c in colls] == list(range(len(colls)))


def test_a_segment_that_cannot_be_made_leaves_why_in_the_current_one(tmp_path):
    """A capped log whose next segment file cannot be opened (no file descriptor left: EMFILE):
    the stop record goes into the room the current segment kept; nothing is written after it."""
    out = _limited(tmp_path, "nofile", 0, max_bytes=200_000)
    assert out["stops"] == ["Too many open files (EMFILE)"]
    assert segment_paths(out["path"]) == []
    raw = read_log(out["path"])
    assert not raw.damage and raw.records[-1]["e"] == "EMFILE"
    assert sum(r["k"] == lf.DISABLED for r in raw.records) == 1


def test_room_is_allocated_past_the_end_and_given_back_at_close(tmp_path):
    """The file holds its records and nothing else (a killed rank's log ends with its last frame),
    with RESERVE bytes more allocated on disk past its end; closing gives them back."""
    fd, path = open_exclusive(str(tmp_path), "rank-00000.0")
    w = LogWriter(fd, path)
    with w.lock:
        w.write({"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "rank": 0, "world": 1, "run": "r"})
        for i in range(3000):
            w.write({"k": lf.COLL, "o": w.string_id("allreduce_"), "g": 0, "ts": i, "j": i}, i)
            c, st = w.counters, os.stat(path)
            assert c.allocated - c.written >= RESERVE and st.st_size == c.written
            assert st.st_blocks * 512 >= c.written + RESERVE
    w.close()
    st = os.stat(path)
    assert st.st_size == w.counters.written and st.st_blocks * 512 < st.st_size + RESERVE and w.stopped is None
    assert len([r for r in read_log(path).records if r["k"] == lf.COLL]) == 3000
