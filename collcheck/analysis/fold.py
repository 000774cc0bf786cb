"""Ranks with identical columns folded into one (reports and the TUI show them once)."""

from __future__ import annotations


def fold_identical(columns: dict[int, tuple]) -> list[tuple[list[int], tuple]]:
    """Group ranks whose columns are equal: [(ranks, column), ...] in rank order."""
    groups: dict[tuple, list[int]] = {}
    for rank in sorted(columns):
        groups.setdefault(columns[rank], []).append(rank)
    return sorted(((ranks, col) for col, ranks in groups.items()), key=lambda x: x[0][0])
