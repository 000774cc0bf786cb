"""collcheck stats' rules in-process (collcheck/stats/): when a straggler, contention or batch hint
is given, on numbers built in memory."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("last_in, slots, members, hinted", [
    (9, 12, 2, False), (11, 12, 2, False), (12, 12, 2, True), (10, 10, 2, True), (27, 30, 4, True),
    (9, 12, 4, True), (5, 6, 4, False), (30, 40, 2, False), (38, 40, 2, True)])
def test_a_straggler_hint_needs_more_lasts_than_chance_gives(last_in, slots, members, hinted):
    """Of two ranks each comes last about half the time: 9 of 12 lasts is chance (7 %) and gives no
    hint, even with much waiting (start-up skew in a short run); 12 of 12 does."""
    from collcheck.stats.hints import straggler_hints
    from collcheck.stats.skew import Skew, Straggler

    top = Straggler(1, wait_caused_us=2e5, last_in=last_in, slots=slots, expected_last=slots / members)
    rest = [Straggler(r, 1e3, 0, slots, slots / members) for r in range(2, members + 1)]
    skew = Skew({}, [top, *rest], [("0", i, 1, 1e4, ("t.py", 5, "f")) for i in range(last_in)])
    assert bool(straggler_hints(skew, [])) == hinted


def test_a_rank_last_only_because_its_previous_collective_completed_later_is_no_straggler():
    """Two ranks all-reducing back to back: the same rank gets the last message of each and issues
    the next one last, every time, though its work took no longer: the waiting its work explains
    (a twentieth here) is too little for a hint; most of it is."""
    from collcheck.stats.hints import straggler_hints
    from collcheck.stats.skew import Skew, Straggler

    for caused, hinted in ((0.05, False), (0.9, True)):
        slots = [("1", i, 1, 1e3, ("t.py", 5, "f"), 0.0) for i in range(400)]
        top = Straggler(1, wait_caused_us=caused * 400 * 1e3, last_in=400, slots=400, expected_last=200)
        skew = Skew({}, [top, Straggler(0, 0.0, 0, 400, 200)], slots)
        assert bool(straggler_hints(skew, [])) == hinted


def test_contention_needs_a_slowdown_measured_on_enough_collectives():
    from collcheck.stats.concurrency import HostLoad
    from collcheck.stats.groups import contention_hints

    def host(by_count):
        return HostLoad("h", list(range(8)), 2, 1, ["1", "2", "3", "4"], ("all_reduce", 400), ("m.py", 3, "f"),
                        {k: [us] * n for k, (n, us) in by_count.items()})

    assert contention_hints([host({2: (50, 300.0), 4: (900, 1000.0)})])[0].evidence["at_once"] == {2: 300.0, 4: 1000.0}
    assert not contention_hints([host({2: (50, 300.0), 4: (900, 400.0)})])  # 1.3x: not enough
    assert not contention_hints([host({2: (5, 300.0), 4: (900, 1000.0)})])  # 5 collectives: too few to compare
    assert not contention_hints([host({4: (900, 1000.0)})])  # nothing to compare with


def test_a_batch_hint_says_what_groups_at_once_and_crowded_cpus_did():
    from collcheck.stats.concurrency import HostLoad
    from collcheck.stats.hints import batch_hints
    from collcheck.stats.sites import SiteStats

    site = SiteStats(("m.py", 3, "f"), "all_reduce", "allreduce_", "1", None, ranks=[0, 1], calls=200,
                     bytes_per_call=400, durations_us=[300.0] * 400, per_rank_us={0: 6e4, 1: 6e4})
    crowded = HostLoad("h", list(range(8)), 2, 1, ["1", "2"], ("all_reduce", 400), ("m.py", 3, "f"),
                       {1: [300.0] * 20, 2: [900.0] * 380})
    (hint,) = batch_hints([site], set(), [crowded])
    assert "with 1 group communicating at once on host h: 300 µs; with 2: 900 µs" in hint.text, hint.text
    assert "8 ranks share 2 CPUs there" in hint.text and hint.evidence["move_us"] == 4.0, hint.text
    crowded.by_count = {1: [300.0] * 20, 2: [320.0] * 380}  # measured: more at once cost no more
    (hint,) = batch_hints([site], set(), [crowded])
    assert "with 2: 320 µs" in hint.text and "CPUs there" not in hint.text, hint.text
    roomy = HostLoad("h", [0, 1], 8, 1, ["1"], ("all_reduce", 400), ("m.py", 3, "f"), {1: [300.0] * 400})
    (hint,) = batch_hints([site], set(), [roomy])
    assert "CPUs there" not in hint.text and "at once" not in hint.text, hint.text
    assert not batch_hints([site], {("m.py", 3, "f")}, [roomy])  # a fuse hint covers that line


def test_groups_created_and_barely_used_are_hinted(tmp_path):
    """Three groups besides the world, two used once each: a hint names those two (and not the
    one used for every step); one barely used group alone is no hint."""
    from support import runs
    from support.cli import stats_json
    from support.runs import Call

    def hinted(groups, calls):
        d = tmp_path / str(len(list(tmp_path.iterdir())))
        d.mkdir()
        runs.write(str(d), groups, {r: list(calls) for r in (0, 1)})
        return [h for h in stats_json(str(d))["hints"] if h["kind"] == "groups"]

    pairs = {"0": (0, 1), "1": (0, 1), "2": (0, 1), "3": (0, 1)}
    steps = [Call(group="3", line=30 + k) for k in range(6)]
    (hint,) = hinted(pairs, [Call(group="1", line=10), Call(group="2", line=20), *steps])
    assert hint["evidence"]["barely_used"] == {"1": 1, "2": 1} and hint["evidence"]["created"] == 3
    assert not hinted({"0": (0, 1), "1": (0, 1), "3": (0, 1)}, [Call(group="1", line=10), *steps])


def test_an_overlap_hint_needs_a_synchronous_call_followed_by_work():
    """Each step's synchronous all-reduce (2 ms) is followed by 10 ms of work before the next
    collective: an overlap hint at its line, the smaller of the two per call; the same steps
    issuing it with async_op, or back to back with the next collective, give none."""
    from types import SimpleNamespace

    from collcheck.stats.hints import overlap_hints
    from collcheck.stats.sites import SiteStats

    sync, async_, busy = ("t.py", 10, "step"), ("t.py", 20, "step"), ("t.py", 30, "step")

    def call(site, t, took, async_op=False):
        return SimpleNamespace(site=site, sig=SimpleNamespace(api="all_reduce", op="allreduce_", role=None),
                               group="0", async_op=async_op, native=False, error=None, t_issue=t, t_done=t + took)

    events, t = {0: [], 1: []}, 1_000_000
    for site, gap, async_op in ((sync, 10_000, False), (async_, 10_000, True), (busy, 0, False)):
        for _ in range(20):
            for r in events:
                events[r].append(call(site, t, 2_000, async_op))
            t += 2_000 + gap + 1
    sites = [SiteStats(s, "all_reduce", "allreduce_", "0", None, ranks=[0, 1], calls=20, durations_us=[2000.0] * 40,
                       per_rank_us={0: 4e4, 1: 4e4}) for s in (sync, async_, busy)]
    (hint,) = overlap_hints(sites, events)
    assert hint.kind == "overlap" and hint.site == sync, hint
    assert hint.gain_s == 20 * 2_000 / 1e6 and hint.evidence["median_gap_us"] == 10_001, hint.evidence
    assert "issue it with async_op=True" in hint.text and "t.py:10" in hint.text, hint.text
