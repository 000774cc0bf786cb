"""Live mode's detector (collcheck/capture/live/detector.py) on summaries built in memory with the
recorder's own hash functions (live_hash): where it suspects a divergence, a hang, a straggler."""

from __future__ import annotations

from support import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from collcheck.capture.live import tables as live_hash
from collcheck.capture.live.detector import Detector

HANG_S = 1.5


def group_entry(sigs: list[int], size: int = 0, balances: dict | None = None) -> list:
    """A group's entry in a summary, as Recorder.live_state builds it from these signatures."""
    table: dict = {}
    for j, s in enumerate(sigs):
        live_hash.mix(table, 0, j, s)
    h, ring = table.get(0, (0, [0] * live_hash.RING))
    return [len(sigs), h, live_hash.ring_bytes(ring, len(sigs)), size, balances or {}]


def summary(q: int, groups: dict, e: int = 0, waiting: float | None = None, state: str | None = None,
            idle: float = 0.0, channels: dict | None = None) -> dict:
    s = {"v": 1, "q": q, "e": e, "g": groups, "c": channels or {}, "m": idle}
    if waiting is not None:
        s["f"] = [e - 1, waiting, "allreduce_", 1]
    if state:
        s["s"] = state
    return s


# -- the detector --------------------------------------------------------------------------------

@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=150), st.integers(2, 4), st.data())
def test_a_slot_where_signatures_differ_is_suspected_there_and_nowhere_else(sigs, world, data):
    det = Detector(world, HANG_S, 5.0)
    same = {r: summary(1, {"0": group_entry(sigs)}, e=len(sigs)) for r in range(world)}
    assert det.update(0.0, same) is None
    rank = data.draw(st.integers(0, world - 1))
    extra = data.draw(st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=80))
    changed = data.draw(st.integers(0, len(extra) - 1))
    others = list(extra)
    others[changed] = (others[changed] + 1) % 2**32  # one rank issues something else there
    seqs = {r: sigs + (others if r == rank else extra) for r in range(world)}
    found = det.update(1.0, {r: summary(2, {"0": group_entry(s)}, e=len(s)) for r, s in seqs.items()})
    assert found is not None and found.kind == "divergence"
    assert (found.group, found.position) == ("0", len(sigs) + changed)
    det.clear(found)  # the analysis found nothing there: the next slots are compared on
    assert det.update(2.0, {r: summary(3, {"0": group_entry(s)}, e=len(s)) for r, s in seqs.items()}) is None


def test_among_many_ranks_at_a_few_counts_one_rank_that_differs_is_suspected_at_its_slot():
    """Thousands of ranks publish a few distinct windows (their counts differ by when they
    published): each window is compared once; the one rank whose window differs is found."""
    base = [(7 * j + 1) % 2**32 for j in range(300)]
    odd = list(base)
    odd[250] += 1
    sums = {r: summary(1, {"0": group_entry((odd if r == 777 else base)[:252 + r % 9])}, e=252 + r % 9)
            for r in range(1024)}
    det = Detector(1024, HANG_S, 5.0)
    found = det.update(0.0, sums)
    assert found is not None and (found.kind, found.group, found.position) == ("divergence", "0", 250)
    det.clear(found)
    assert det.update(1.0, {r: dict(s, q=2) for r, s in sums.items()}) is None


def test_ranks_further_apart_than_the_window_are_compared_where_they_overlap():
    det = Detector(2, HANG_S, 5.0)
    behind, ahead = list(range(10)), list(range(200))
    ahead[5] = 999  # out of the leader's window by now: not comparable, not a suspicion
    assert det.update(0.0, {0: summary(1, {"0": group_entry(behind)}), 1: summary(1, {"0": group_entry(ahead)})}) is None


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(2, 5), st.data())
def test_all_to_all_balances_cancel_exactly_when_split_sizes_agree(size, data):
    matrix = [[data.draw(st.integers(0, 1000)) for _ in range(size)] for _ in range(size)]  # i sends j
    splits = {i: ([matrix[i][j] for j in range(size)], [matrix[j][i] for j in range(size)]) for i in range(size)}
    total = sum(live_hash.a2a_balance(splits[i], i, size) for i in range(size))
    assert total % 2**32 == 0
    i, j = data.draw(st.integers(0, size - 1)), data.draw(st.integers(0, size - 1))
    outs = list(splits[i][1])
    outs[j] += data.draw(st.integers(1, 50))  # rank i expects more from j than j sends
    wrong = dict(splits)
    wrong[i] = (splits[i][0], outs)
    assert sum(live_hash.a2a_balance(wrong[k], k, size) for k in range(size)) % 2**32 != 0


def test_an_all_to_all_whose_sizes_do_not_add_up_is_suspected():
    det = Detector(2, HANG_S, 5.0)
    ok = {0: live_hash.a2a_balance(([1, 2], [1, 3]), 0, 2), 1: live_hash.a2a_balance(([3, 4], [2, 4]), 1, 2)}
    bad = {0: ok[0], 1: live_hash.a2a_balance(([3, 4], [5, 4]), 1, 2)}
    sig = [7]
    assert det.update(0.0, {r: summary(1, {"0": group_entry(sig, 2, {0: ok[r]})}) for r in (0, 1)}) is None
    det = Detector(2, HANG_S, 5.0)
    found = det.update(0.0, {r: summary(1, {"0": group_entry(sig, 2, {0: bad[r]})}) for r in (0, 1)})
    assert found is not None and (found.kind, found.position) == ("divergence", 0)


def test_sends_are_compared_with_the_peers_recvs():
    det = Detector(2, HANG_S, 5.0)
    send = group_entry([1, 2, 3])[:3]
    recv_ok, recv_bad = group_entry([1, 2, 3])[:3], group_entry([1, 5, 3])[:3]
    assert det.update(0.0, {0: summary(1, {}, channels={"0>1": send}), 1: summary(1, {}, channels={"0<0": recv_ok})}) is None
    found = Detector(2, HANG_S, 5.0).update(0.0, {0: summary(1, {}, channels={"0>1": send}),
                                                  1: summary(1, {}, channels={"0<0": recv_bad})})
    assert found is not None and (found.group, found.position, found.ranks) == ("0", 1, [0, 1])


def test_a_busy_rank_makes_a_straggler_not_a_hang():
    det = Detector(2, HANG_S, 5.0)
    g = {"0": group_entry([1, 2])}
    for t in range(6):  # rank 0 waits in a collective for 5 s; rank 1 computes (publishing, nothing in flight)
        assert det.update(float(t), {0: summary(t, g, e=2, waiting=float(t), idle=float(t)),
                                     1: summary(t, g, e=2, idle=float(t))}) is None


def test_nothing_moving_while_every_rank_waits_is_a_hang_until_cleared():
    det = Detector(2, HANG_S, 5.0)
    g = {"0": group_entry([1, 2])}
    ranks = lambda t, q: {r: summary(q, g, e=2, waiting=t, idle=t) for r in (0, 1)}  # noqa: E731
    assert det.update(0.5, ranks(0.5, 1)) is None  # not yet: something moved half a second ago
    found = det.update(2.0, ranks(2.0, 2))
    assert found is not None and found.kind == "hang" and found.ranks == [0, 1]
    det.clear(found)  # the analysis found nothing (every member inside the same collective)
    assert det.update(3.0, ranks(3.0, 3)) is None  # asked once per frozen state


def test_a_rank_that_exited_while_the_others_wait_is_a_hang():
    det = Detector(2, HANG_S, 5.0)
    g = {"0": group_entry([1, 2])}
    assert det.update(3.0, {0: summary(1, g, e=2, waiting=3.0, idle=3.0), 1: summary(1, g, e=2, state="end")}).kind == "hang"


def test_ranks_that_ended_with_unequal_counts_are_suspected_at_the_end():
    det = Detector(2, HANG_S, 5.0)
    short, long = {"0": group_entry([1, 2])}, {"0": group_entry([1, 2, 3])}
    assert det.update(0.0, {0: summary(1, short, state="end"), 1: summary(1, short, state="end")}) is None
    assert det.finished()
    det = Detector(2, HANG_S, 5.0)
    found = det.update(0.0, {0: summary(1, short, state="end"), 1: summary(1, long, state="end")})
    assert found is not None and found.kind == "end"
    det.clear(found)
    assert det.finished()
    det = Detector(2, HANG_S, 5.0)  # rank 1's recording stopped after an internal error: fewer in its log
    stopped = dict(summary(1, short, state="end"), x=1)
    assert det.update(0.0, {0: summary(1, long, state="end"), 1: stopped}) is None and det.finished()
