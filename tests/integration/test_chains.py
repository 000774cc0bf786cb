"""The user's call chain in reports, and as evidence: equal collectives reached from different
places of the program are a divergence at that slot, not collectives later."""

from __future__ import annotations

import os

import pytest

from support.cli import diff_json, diff_text
from support.jobs import marker_lines, program

SCRIPT = program("chains.py")
NAME = os.path.basename(SCRIPT)


@pytest.mark.recordings("chains_extra_forward")
def test_an_extra_forward_on_one_rank_is_found_where_the_chains_part(corpus):
    """Rank 0's visualisation pass all-gathers statistics from the same line and with the same shape
    as rank 1's training pass: the first finding is that slot (step 2's first gather, #12), rank 0
    alone, naming both lines of main() the passes came from; the op mismatch two calls later
    (gradient all-reduce vs all-gather) is a consequence."""
    marks = marker_lines(SCRIPT)
    rec = corpus("chains_extra_forward")
    assert rec.rc != 0, rec.tail()
    code, report = diff_json(rec.run_dir)
    assert code == 1, report
    first = report["findings"][0]
    assert (first["kind"], first["group"], first["position"], first["ranks"]) == ("semantic_mismatch", "0", 12, [0]), first
    sites = {e["site"]["line"] for e in first["events"].values()}
    assert sites == {marks["stats_gather"]}, sites  # the same innermost line on both ranks
    assert f"{NAME}:{marks['visualise_call']} in main() via visualise()" in first["message"], first["message"]
    assert f"{NAME}:{marks['train_call']} in main() via train_step()" in first["message"], first["message"]
    assert first["fix"].startswith("run the same passes on every rank"), first["fix"]
    outer = {r: [f["line"] for f in e["chain"]] for r, e in first["events"].items()}
    assert outer == {"0": [marks["main"], marks["visualise_call"], marks["extra_forward"], marks["stats_gather"]],
                     "1": [marks["main"], marks["train_call"], marks["train_forward"], marks["stats_gather"]]}, outer
    # (what follows is its consequence: the slot where the ops part, whoever the loops blame there)
    assert any(f["position"] == 14 and f["kind"] in ("op_mismatch", "extra") for f in report["findings"][1:]), report["findings"]
    assert_recorded_chains(rec.run_dir, marks)


def assert_recorded_chains(run_dir: str, marks: dict) -> None:
    """Every collective carries the chain from the program's outermost frame to the call site, with
    torch's frames (nn.Module's call machinery) left out; one interned chain per way the program
    reaches the call (the recorder's part; test_recorder.py reads the clean run, -m slow)."""
    from collcheck.model import load_run

    run = load_run(run_dir)
    gather = ((NAME, marks["main"], "<module>"), (NAME, marks["train_call"], "main"),
              (NAME, marks["train_forward"], "train_step"), (NAME, marks["stats_gather"], "forward"))
    for log in run.ranks.values():
        chains = {tuple((os.path.basename(f), line, fn) for f, line, fn in e.chain)
                  for e in map(log.event, range(len(log))) if e.sig.op in ("allgather_", "allreduce_")}
        assert gather in chains, chains
        assert all(c[0] == (NAME, marks["main"], "<module>") for c in chains), chains
        assert len(log.chain_sites) == len(set(log.chain)), log.chain_sites  # every key used resolves


@pytest.mark.slow
@pytest.mark.recordings("chains_helper_barrier")
def test_a_barrier_in_a_helper_is_shown_with_its_caller(corpus):
    marks = marker_lines(SCRIPT)
    rec = corpus("chains_helper_barrier")
    assert rec.rc != 0, rec.tail()
    run_dir = rec.run_dir
    code, report = diff_json(run_dir)
    first = report["findings"][0]
    assert code == 1 and (first["kind"], first["ranks"], first["position"]) == ("extra", [0], 12), first
    text = diff_text(run_dir)
    # every frame named below the folder the chain's files share (the full paths: JSON, detail pane)
    chain = (f"{NAME}:{marks['evaluate_calls']} evaluate() > {NAME}:{marks['helper_barrier']} in "
             "sync_checkpoint()")
    assert chain in text, text
