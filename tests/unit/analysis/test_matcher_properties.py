"""Property tests of the analysis on synthetic logs in the real format (collcheck.synth).

(a) every valid program (2-16 ranks, subgroups, P2P, coalesced ops, loop-like reused call
sites, call chains, some reached by odd ranks through another helper every time) is clean;
(b) one injected fault of each kind is the first finding, with the right kind, group, position
(in the majority's numbering) and culprit ranks (a `detour`: a rank reaches a call site through
a chain no rank took before, as an extra forward pass does).
"""

from __future__ import annotations

import random
import tempfile

import pytest
from support import examples
from hypothesis import HealthCheck, given, settings, strategies as st

from collcheck import synth
from collcheck.analysis.diff import analyse
from collcheck.analysis.splits import mismatched_pairs
from collcheck.model import load_run

SETTINGS = settings(deadline=None, max_examples=examples(25), suppress_health_check=[HealthCheck.too_slow],
                    derandomize=False)


@st.composite
def programs(draw, min_world=2, max_world=16):
    world = draw(st.integers(min_world, max_world))
    seed = draw(st.integers(0, 2**32 - 1))
    n_ops = draw(st.integers(1, 60))
    groups = draw(st.integers(0, 3))
    p2p = draw(st.booleans())
    coalesced = draw(st.booleans())
    return synth.generate_program(random.Random(seed), world, n_ops, groups=groups, p2p=p2p, coalesced=coalesced)


def analyse_program(prog, faults=()):
    with tempfile.TemporaryDirectory() as d:
        paths = synth.write_run(d, prog, faults)
        assert len(paths) == prog.world
        run = load_run(d)
        assert sorted(run.ranks) == list(range(prog.world))
        return analyse(run)


def summary(f):
    return (f.kind, f.group, f.position, f.ranks)


@SETTINGS
@given(programs())
def test_valid_programs_are_clean(prog):
    report = analyse_program(prog)
    assert [summary(f) for f in report.findings] == []
    assert report.verdict == "clean"
    assert not report.run.warnings
    for name in prog.groups:
        assert report.counts.get(name, 0) == len(prog.group_sequence(name)) or not prog.group_sequence(name)


@pytest.mark.parametrize("kind", synth.FAULT_KINDS)
@SETTINGS
@given(prog=programs(), data=st.data())
def test_injected_fault_is_first_finding(kind, prog, data):
    candidates = synth.fault_candidates(prog, kind)
    if not candidates:
        return  # e.g. no broadcast for a root fault, no P2P for an unmatched one
    fault = data.draw(st.sampled_from(candidates), label="fault")
    expected = tuple(fault.expect(prog))
    report = analyse_program(prog, [fault])
    assert report.findings, f"no finding for {fault}"
    if len(prog.groups[expected[1]]) == 2 and report.findings[0].details.get("blame"):
        # no majority, but the alignment (blame.py) decided: it must name the rank that deviated
        expected = (*expected[:3], [fault.rank])
    assert summary(report.findings[0]) == expected, [summary(f) for f in report.findings[:3]]
    assert report.verdict == "mismatch"


def test_generator_covers_every_fault_kind():
    """The generator makes programs where every fault kind applies (else (b) tests nothing)."""
    seen = set()
    rng = random.Random(1)
    for _ in range(40):
        prog = synth.generate_program(rng, rng.randint(2, 8), 40, groups=2)
        seen |= {k for k in synth.FAULT_KINDS if synth.fault_candidates(prog, k)}
    assert seen == set(synth.FAULT_KINDS)


def test_two_rank_missing_and_extra_follow_call_sites():
    """World 2: no majority. Skipping a call made elsewhere is 'missing'; a call from a site the
    other rank never executes is 'extra' (align.py _settle_tie), whichever rank is lower."""
    prog = synth.Program(2, {"0": (0, 1)}, [])
    a, b = prog.add_site(), prog.add_site()
    t = (("float32", (8,)),)
    for _ in range(4):
        prog.ops += [synth.Op("allreduce_", "0", t, 0, site=a), synth.Op("broadcast_", "0", t, root=0, site=b)]
    for rank in (0, 1):
        f = synth.Fault("missing", rank, 2)
        assert summary(analyse_program(prog, [f]).findings[0]) == ("missing", "0", 2, [rank])
        f = synth.Fault("extra", rank, 3, "0")
        assert summary(analyse_program(prog, [f]).findings[0]) == ("extra", "0", 3, [rank])


def test_missing_call_in_a_loop_is_not_an_order_mismatch():
    """A loop body A B C repeated: a rank that skips one A is missing A, not a permutation."""
    prog = synth.Program(4, {"0": (0, 1, 2, 3)}, [])
    sites = [prog.add_site() for _ in range(3)]
    body = [synth.Op("allreduce_", "0", (("float32", (8,)),), 0, site=sites[0]),
            synth.Op("allreduce_", "0", (("float32", (16,)),), 0, site=sites[1]),
            synth.Op("barrier", "0", (), site=sites[2])]
    prog.ops = body * 5
    report = analyse_program(prog, [synth.Fault("missing", 2, 6)])
    assert [summary(f) for f in report.findings] == [("missing", "0", 6, [2])]


def test_changed_call_in_a_run_of_equal_calls_is_not_extra():
    """Per-parameter all-reduces of one shape: one rank's different shape is a shape mismatch."""
    prog = synth.Program(4, {"0": (0, 1, 2, 3)}, [])
    s = prog.add_site()
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (64,)),), 0, site=s)] * 12
    report = analyse_program(prog, [synth.Fault("shape_mismatch", 1, 5)])
    assert [summary(f) for f in report.findings] == [("shape_mismatch", "0", 5, [1])]


def test_order_mismatch_reports_one_finding():
    prog = synth.Program(3, {"0": (0, 1, 2)}, [])
    sites = [prog.add_site() for _ in range(2)]
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (8,)),), 0, site=sites[0]),
                synth.Op("broadcast_", "0", (("float32", (4,)),), root=1, site=sites[1])] * 3
    report = analyse_program(prog, [synth.Fault("order_mismatch", 0, 2)])
    assert [summary(f) for f in report.findings] == [("order_mismatch", "0", 2, [0])]


def _metrics_program():
    """Two all_reduces of different sizes from one line (the order_mismatch scenario's loop)."""
    prog = synth.Program(2, {"0": (0, 1)}, [])
    s = prog.add_site()
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (3, 3)),), 0, site=s),
                synth.Op("allreduce_", "0", (("float32", (1,)),), 0, site=s)]
    return prog


@pytest.mark.parametrize("crashed", [False, True])
def test_log_cut_short_is_not_read_as_a_skipped_call(crashed):
    """Rank 1 issued the 1-element all_reduce where rank 0 issued the 3x3 one, then its log
    ends. Had it finished, it skipped the 3x3 one; cut short (killed, or gloo's size check
    aborted it), it may have issued it next: the slot's own difference is reported. A swap
    that the cut-short rank did issue in full is still an order mismatch."""
    prog = _metrics_program()
    with tempfile.TemporaryDirectory() as d:
        paths = synth.write_run(d, prog, [synth.Fault("missing", 1, 0)], trailer=False)
        if crashed:
            with open(paths[1].removesuffix(".msgpack") + ".sigterm.txt", "w") as f:
                f.write("Fatal Python error: Aborted\n\nThread 0x1 (most recent call first):\n")
        run = load_run(d)
        assert run.ranks[1].state == ("crashed" if crashed else "killed")
        assert summary(analyse(run).findings[0]) == ("shape_mismatch", "0", 0, [1])
    finished = analyse_program(prog, [synth.Fault("missing", 1, 0)])
    assert summary(finished.findings[0]) == ("missing", "0", 0, [1])
    with tempfile.TemporaryDirectory() as d:
        synth.write_run(d, prog, [synth.Fault("order_mismatch", 1, 0)], trailer=False)
        assert summary(analyse(load_run(d)).findings[0]) == ("order_mismatch", "0", 0, [1])


# ---------------------------------------------------------------------------------------------
# all_to_all_single split sizes (analysis/splits.py)


@st.composite
def routings(draw):
    """A consistent all-to-all: rows[i][j] = rows rank i sends to rank j, per-row elements."""
    n = draw(st.integers(2, 6))
    rows = [[draw(st.integers(0, 5)) for _ in range(n)] for _ in range(n)]
    return rows, draw(st.integers(1, 8))


def sizes_of(rows, per_row, explicit=True):
    n = len(rows)
    return [(sum(rows[i]), per_row, tuple(rows[i]) if explicit else (), tuple(rows[j][i] for j in range(n))
             if explicit else ()) for i in range(n)]


@SETTINGS
@given(routings())
def test_consistent_splits_have_no_mismatch(routing):
    rows, per_row = routing
    assert mismatched_pairs(sizes_of(rows, per_row)) == []
    n = len(rows)
    even = [[2] * n for _ in range(n)]  # empty split lists: even splits of dim 0
    assert mismatched_pairs(sizes_of(even, per_row, explicit=False)) == []


@SETTINGS
@given(routings(), st.data())
def test_one_wrong_output_split_is_the_one_pair(routing, data):
    rows, per_row = routing
    n = len(rows)
    src, dst = data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1))
    delta = data.draw(st.sampled_from([-1, 1, 3]))
    sizes = sizes_of(rows, per_row)
    outs = list(sizes[dst][3])
    if outs[src] + delta < 0:
        delta = 1
    outs[src] += delta  # dst expects a different number of rows from src than src sends
    sizes[dst] = (*sizes[dst][:3], tuple(outs))
    assert mismatched_pairs(sizes) == [(src, dst, rows[src][dst] * per_row, (rows[src][dst] + delta) * per_row)]
