"""Every scenario, recorded under real torchrun processes, diagnosed by the real CLI.

The expected findings (verdict, kind, group, position, culprit ranks, call-site lines) are in
scenarios/<name>/expected.json; valid scenarios expect verdict "clean" and no finding.
"""

from __future__ import annotations

import json
import os

import pytest

from support.cli import diff_json
from collcheck.logfile.tail import read_tail
from collcheck.model import load_run
from support.corpus import params, scenario_names
from support.framework_labels import assert_labels_speak_their_framework
from support.jobs import SCENARIOS
from support.race_helpers import swap_cut_by_abort

NAMES = [n for n in scenario_names() if (SCENARIOS / n / "expected.json").exists()]
# -m slow: second cases of a pattern the default run already records (a skipped barrier, a
# rooted op, DDP without join(), a P2P mismatch, subgroups, a correct DDP + join() program: case 1 and
# case 6 are join_uneven_inputs' pattern, a correct program of many small collectives: per_param_allreduce's,
# one of subgroups: every_op's), and kinds whose recording the default run covers with its test
# programs (every op, DDP's labels) or elsewhere (dtype_mismatch: test_live.py diffs its recording on
# simnccl): the matcher's logic behind each kind is tested in-process
# (tests/unit/analysis/test_matcher_properties.py, test_align.py). The default run keeps the
# scenarios the other tests read, bucket_order_threads (seed 003) and group_mismatch.
SLOW = {"seed004_case1", "seed004_case2", "seed004_case3", "seed004_case5", "seed004_case6", "rank0_only_barrier",
        "p2p_tag_mismatch", "gather_scatter_root", "root_mismatch", "subgroup_members_only", "alltoall_split_mismatch",
        "extra_allreduce", "order_mismatch", "reduce_op_mismatch", "semantic_mismatch", "train_then_eval_gather",
        "many_small_broadcasts", "pairwise_groups", "dtype_mismatch"}


def summarize(finding: dict) -> dict:
    lines = {r: e["site"]["line"] for r, e in finding["events"].items() if e and e.get("site")}
    return {"kind": finding["kind"], "group": finding["group"], "position": finding["position"],
            "ranks": finding["ranks"], "lines": lines}


@pytest.mark.parametrize("name", params(NAMES, lambda n: f"scenario:{n}", slow=SLOW))
def test_scenario(name, corpus):
    with open(SCENARIOS / name / "expected.json") as f:
        expected = json.load(f)
    rec = corpus(f"scenario:{name}")
    assert rec.rc is not None, rec.tail()
    code, report = diff_json(rec.run_dir)
    assert report["verdict"] == expected["verdict"], json.dumps(report["findings"][:2], indent=1)
    got = [summarize(f) for f in report["findings"]]
    if expected["verdict"] == "clean":
        assert got == [] and code == 0 and rec.rc == 0, rec.tail()
        assert not os.path.exists(os.path.join(rec.run_dir, "live-report.json")), rec.tail()  # live mode: silent
        return
    assert code == 1
    want = expected["findings"]
    crashed = [r for r, s in report["ranks"].items() if s["state"] == "crashed"]
    if got[:1] != want[:1] and swap_cut_by_abort(_key(want[0]), _key(got[0]), crashed):
        return  # gloo aborted the culprit before it issued the swapped call (race_helpers.py)
    assert got[: len(want)] == want, json.dumps(got[:3], indent=1)


@pytest.mark.parametrize("name", params(NAMES, lambda n: f"scenario:{n}", slow=SLOW))
def test_every_collective_speaks_the_framework_that_issued_it(name, corpus):
    """The scenarios are recorded with full stacks (support/corpus.py): each collective's label is
    checked against the torch framework on its stack (support/framework_labels.py)."""
    from collcheck.model import load_run

    rec = corpus(f"scenario:{name}")
    assert rec.rc is not None, rec.tail()
    assert_labels_speak_their_framework(load_run(rec.run_dir))


def _key(summary: dict) -> tuple:
    return (summary["kind"], summary["group"], summary["position"], tuple(summary["ranks"]),
            tuple(sorted(summary["lines"].items())))


def test_every_scenario_has_expectations():
    missing = [n for n in scenario_names() if n not in NAMES]
    assert not missing, f"scenarios without expected.json: {missing}"


@pytest.mark.parametrize("name", params(NAMES, lambda n: f"scenario:{n}", slow=SLOW))
def test_each_log_ends_with_a_checkpoint_of_what_it_issued(name, corpus):
    """The recorder's checkpoint (logfile/checkpoint.py) counts every collective the log holds;
    the ranks of a clean run agree on every group's count and hash, those of a buggy one do not."""
    with open(SCENARIOS / name / "expected.json") as f:
        expected = json.load(f)
    rec = corpus(f"scenario:{name}")
    run = load_run(rec.run_dir)
    tails = {r: read_tail(log.path) for r, log in run.ranks.items()}
    for r, tail in tails.items():
        if tail is None:
            assert run.ranks[r].state in ("crashed", "killed", "killed-in-collective"), r  # killed before it
            continue
        cp = tail.checkpoint
        assert cp["n"] == len(run.ranks[r]) == sum(count for _, count, _ in cp["c"]), (r, cp)
    # (a group's collectives: P2P channels, keyed by peer, differ from rank to rank by design)
    summaries = {tuple(tuple(c) for c in t.checkpoint["c"] if not c[0] & (3 << 32)) for t in tails.values() if t}
    all_members = all(len(g.ranks or ()) == run.world for log in run.ranks.values() for g in log.groups)
    if expected["verdict"] == "clean":
        assert len(summaries) == 1 or not all_members, summaries
    elif all_members and len(tails) == run.world and None not in tails.values():
        # (an all-to-all whose split sizes differ agrees on the signatures: its sizes tell it apart)
        assert len({(tuple(map(tuple, t.checkpoint["c"])), t.checkpoint.get("a")) for t in tails.values()}) > 1
