"""Live mode's checker (collcheck/capture/live/checker.py) against a real store: it reads every
rank's summary a batch of keys at a time, and waits for its judge on any file descriptor."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import msgpack
import pytest
from torch.distributed import HashStore

from collcheck.base.settings import Settings
from collcheck.capture.live import checker as live_check
from collcheck.capture.live.publisher import KEY_PREFIX


class Counting:
    """A store that counts the requests made of it."""

    def __init__(self, store):
        self.store, self.calls = store, []

    def check(self, keys):
        self.calls.append(("check", len(keys)))
        return self.store.check(keys)

    def multi_get(self, keys):
        self.calls.append(("multi_get", len(keys)))
        return self.store.multi_get(keys)


def test_summaries_are_read_a_batch_of_keys_per_request(tmp_path):
    world, batch = 1100, live_check.KEYS_PER_REQUEST
    store = HashStore()
    absent = {5, 700}
    for r in range(world):
        if r not in absent:
            store.set(f"{KEY_PREFIX}{r}", msgpack.packb({"v": 1, "r": r, "q": 1}))
    checker = live_check.Checker(Counting(store), world, str(tmp_path), 0, Settings())
    out = checker.read()
    assert sorted(out) == sorted(set(range(world)) - absent) and out[1099]["r"] == 1099
    calls = checker.store.calls
    # one check per batch, one per key in the batches where one is missing, a multi_get per batch
    assert calls == ([("check", batch)] + [("check", 1)] * batch + [("check", batch)] + [("check", 1)] * batch
                     + [("check", world - 2 * batch), ("multi_get", batch), ("multi_get", batch),
                        ("multi_get", world - 2 * batch - 2)])
    for r in absent:
        store.set(f"{KEY_PREFIX}{r}", msgpack.packb({"v": 1, "r": r, "q": 1}))
    calls.clear()
    assert len(checker.read()) == world
    assert calls == [("check", 2), ("multi_get", batch), ("multi_get", batch), ("multi_get", world - 2 * batch)]


def test_the_judge_is_waited_for_past_file_descriptor_1024(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip("fewer than 1200 file descriptors allowed")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    filler = []
    try:
        while not filler or filler[-1] < 1100:  # the judge's pipes come above them, past select()'s limit
            filler.append(os.open(os.devnull, os.O_RDONLY))
        checker = live_check.Checker(None, 2, str(tmp_path), 0, Settings())
        checker.analysis = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.readline(); print('{\"finding\": \"found\"}', flush=True)"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert checker.analysis.stdout.fileno() > 1024
        assert checker.consult({"kind": "divergence", "group": "0", "position": 3}) == "found"
        checker.close()
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
