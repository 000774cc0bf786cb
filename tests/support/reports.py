"""Checks of reports shared by unit and integration tests."""

from __future__ import annotations


def assert_rows_line_up(report, context: int = 4) -> None:
    """Every row of every finding's side-by-side table is one slot, the same on every rank."""
    from collcheck.report.text import slot_rows

    for f in report.findings:
        if f.kind in ("group_mismatch", "non_member_call") or f.details.get("p2p"):
            continue
        seqs = report.sequences.group(f.group)
        for rank, rows in slot_rows(report, f, context).items():
            for k, i in enumerate(rows):
                if i >= 0:
                    assert seqs.slot(rank, i) + seqs.start == f.number - context + k, (f.kind, f.number, rank, k)
