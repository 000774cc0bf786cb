"""The log writer (collcheck/logfile/writer.py) in-process: bounded logs in segments, each
readable on its own."""

from __future__ import annotations

import os

from collcheck.logfile import format as lf
from collcheck.logfile.writer import LogWriter, open_exclusive
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
    w.close()
    segs = segment_paths(path)
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
