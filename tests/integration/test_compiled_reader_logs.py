"""Logs of real jobs (torchrun, gloo; DDP's buckets from C++, join, chains, the compiled and the
Python recorder) read the same with the compiled log reader as with the Python loop alone. (These
jobs are short: most of their frames are a template's first collective, which the Python loop
reads; how much of a long log the compiled loop takes: tests/unit/logfile/test_compiled_reader.py.)"""

from __future__ import annotations

import glob
import os

import pytest
from support.logbytes import assert_same

from collcheck.logfile import compiled
from collcheck.logfile.reader import read_bytes

RECORDINGS = ("scenario:seed004_case4", "scenario:per_param_allreduce", "scenario:join_uneven_inputs",
              "chains_extra_forward", "ddp_join@compiled")


@pytest.mark.skipif(compiled.library() is None, reason="no C compiler here: the Python loop reads alone")
@pytest.mark.recordings(*RECORDINGS)
def test_recorded_jobs_read_the_same_with_the_compiled_loop(corpus):
    for name in RECORDINGS:
        logs = sorted(glob.glob(os.path.join(corpus(name).run_dir, "rank-*.msgpack")))
        assert logs, name
        for path in logs:
            data = read_bytes(path)
            assert_same(data, times=True)
            assert_same(data, keep_seq=True, limit=10)
