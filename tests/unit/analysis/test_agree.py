"""analysis/agree.py: the groups whose members agree on everything, found at once, are exactly
those where the matcher and the chain comparison find nothing; a group that differs in one
signature, one call chain or one member goes the usual way (and is reported); a group nobody
issued anything on agrees."""

from __future__ import annotations

from support import runs
from support.runs import Call

from collcheck.analysis.agree import agreeing
from collcheck.analysis.diff import analyse
from collcheck.model import Sequences, load_run

GROUPS = {"0": (0, 1, 2), "same": (0, 1, 2), "op": (0, 1, 2), "chain": (0, 1, 2), "short": (0, 1, 2),
          "pair": (1, 2), "alone": (2,), "idle": (0, 1, 2)}


def _calls(rank: int) -> list[Call]:
    out = [Call(group="0", line=5), Call(group="same", line=10), Call(group="same", line=11, size=8)]
    out += [Call(group="op", line=20, op="broadcast_" if rank == 1 else "allreduce_")]
    # the same collective reached by another chain on rank 2 (an extra pass through a helper)
    out += [Call(group="chain", line=30, outer=(("/job/train.py", 90 if rank == 2 else 80, "main"),))] * 2
    out += [Call(group="short", line=40)] * (1 if rank == 0 else 2)
    out += [Call(group="pair", line=50)] * 3 if rank else []
    out += [Call(group="alone", line=60)] if rank == 2 else []
    return out


def test_the_groups_that_agree_are_those_with_nothing_to_find(tmp_path):
    runs.write(str(tmp_path), GROUPS, {r: _calls(r) for r in range(3)})
    run = load_run(str(tmp_path), workers=1)
    quiet = agreeing(run, Sequences(run))
    assert quiet == {"0": 1, "same": 2, "pair": 3, "alone": 1, "idle": 0}, quiet
    report = analyse(run)
    assert {f.group for f in report.findings} >= {"op", "short"}, [(f.kind, f.group) for f in report.findings]
    assert {f.group for f in report.findings}.isdisjoint(quiet)
    assert {g: report.counts[g] for g in quiet} == quiet
