"""The timelines' first page as plain data: worded by the loader process from the real grid
(`first_page`), shown by the interface (`PageGrid`) until the whole run is built there.

A page holds the first ROWS rows of the first COLUMNS folded columns: each cell's status, its
texts longest first (cells.py: the same words as the whole grid's) and where its event was
issued. A PageGrid answers what the timeline widget and the status line ask of a Grid for those
rows; nothing else is known until the run is built (the app says so)."""

from __future__ import annotations

from ..model import group_label
from .cells import cell_options, fit
from .grid import QUIET, Column

__all__ = ["COLUMNS", "ROWS", "PageGrid", "first_page"]

ROWS = 256  # the first rows sent: more than a terminal shows
COLUMNS = 32  # the first folded columns sent: at MIN_COL_W, more than a terminal shows


JUDGED = {"matched": "issued", "mismatched": "issued", "extra": "issued", "missing": "not issued"}  # (unjudged)


def first_page(report, grid, marks: dict, culprits: dict, rows: int = ROWS, columns: int = COLUMNS,
               judged: bool = True) -> dict:
    """The grid's first `rows` x `columns` cells, its marks and culprits there, as builtins.

    `judged` False (a part of the run's logs): no cell says whether ranks agree (matched,
    mismatched, extra, missing), only what each rank's own log says: the rest may disagree."""
    shown = grid.columns[:columns]
    n = min(len(grid), rows)
    page_rows = []
    for row in range(n):
        grp, k = grid.slot(row)
        cells = []
        for col in shown:
            status = grid.status(col.rep, row)
            status = status if judged else JUDGED.get(status, status)
            rep = grid.folds[col.fold][0]  # (ranks of one fold have identical signatures here)
            ev = grid.event(rep, row) if status not in QUIET else None
            cells.append([status, cell_options(ev, status), f" at {ev.where()}" if ev is not None else ""])
        page_rows.append([grp, k, grid.number(grp, k), cells])
    keep = set(range(n))
    ranks = {rank for c in shown for rank in c.ranks}
    return {"group": grid.group, "label": group_label(report.run, grid.group) if grid.group is not None else None,
            "rows": page_rows, "total_rows": len(grid), "total_columns": len(grid.columns),
            "columns": [[list(c.ranks), c.fold] for c in shown],
            "marks": [[r, m] for r, m in marks.items() if r in keep],
            "culprits": [[r, sorted(set(rs) & ranks)]
                         for r, rs in culprits.items() if r in keep]}


class PageGrid:
    """The first page of a grid, from `first_page`'s data (see Grid for what each method says)."""

    def __init__(self, page: dict):
        self.group = page["group"]
        self.label = page["label"]  # the group's name as the summary line says it
        self.total_rows, self.total_columns = int(page["total_rows"]), int(page["total_columns"])
        self.columns = [Column([int(r) for r in ranks], int(fold)) for ranks, fold in page["columns"]]
        self.folds = {c.fold: c.ranks for c in self.columns}
        self.fold_of: dict[int, int] = {}  # (no rank can be unfolded or gone to before the run is built)
        self._rows = [(str(g), int(k), int(number), cells) for g, k, number, cells in page["rows"]]
        self._numbers = {(g, k): n for g, k, n, _ in self._rows}
        self._at = {r: i for i, c in enumerate(self.columns) for r in {c.rep, self.folds[c.fold][0]}}
        self.marks = {int(r): str(m) for r, m in page["marks"]}
        self.culprits = {int(r): set(rs) for r, rs in page["culprits"]}

    def __len__(self) -> int:
        return len(self._rows)

    def slot(self, row: int) -> tuple[str, int]:
        g, k, _, _ = self._rows[row]
        return g, k

    def number(self, group: str, k: int) -> int:
        return self._numbers.get((group, k), k)

    def _cell(self, rank: int, row: int) -> list:
        return self._rows[row][3][self._at[rank]]

    def status(self, rank: int, row: int) -> str:
        return str(self._cell(rank, row)[0])

    def cell(self, rank: int, row: int, status: str, width: int | None = None) -> str:
        return fit([str(t) for t in self._cell(rank, row)[1]], width)

    def where(self, rank: int, row: int, status: str) -> str:
        return str(self._cell(rank, row)[2])

    def toggle_fold(self, col: int) -> int:
        return col

    def column_of(self, rank: int) -> int:
        return next(i for i, c in enumerate(self.columns) if rank in c.ranks)
