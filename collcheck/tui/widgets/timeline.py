"""Side-by-side timelines: one column per set of identical ranks, a Line API widget that
renders only the visible rows x columns and decodes only the events on screen."""

from __future__ import annotations

import time

from rich.cells import set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...base.untrusted import one_line
from ..cells import cell_text  # noqa: F401 - (where tests and older callers find it)
from ..grid import STATUS, Grid
from ..messages import CursorMoved

MIN_COL_W = 32  # characters per column, separator included, when the columns overflow the width
GUTTER = 10


def column_width(n_columns: int, width: int) -> int:
    """Each column's share (separator included) of `width` cells after the gutter, at least MIN_COL_W."""
    return max(MIN_COL_W, (width - GUTTER) // n_columns) if n_columns else MIN_COL_W


class Timeline(ScrollView, can_focus=True):
    """The timeline grid of one view; the cursor selects one (row, column) cell."""

    BINDINGS = [
        Binding("up", "move(-1, 0)", "up", show=False),
        Binding("down", "move(1, 0)", "down", show=False),
        Binding("left", "move(0, -1)", "left", show=False),
        Binding("right", "move(0, 1)", "right", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "edge(-1)", "first row", show=False),
        Binding("end", "edge(1)", "last row", show=False),
        Binding("e,space", "toggle_fold", "fold/unfold"),
    ]

    cursor_row: reactive[int] = reactive(0, always_update=True)
    cursor_col: reactive[int] = reactive(0, always_update=True)
    step_mode: reactive[bool] = reactive(False)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.grid: Grid | None = None
        self.marks: dict[int, str] = {}  # row -> gutter mark (findings)
        self.culprits: dict[int, set[int]] = {}  # row -> culprit ranks of findings there
        self.painted: tuple | None = None  # (scroll_y, time) of the last paint of the header: benchmark
        self.col_w = MIN_COL_W  # the columns share the width: recomputed on every resize and refold

    # -- data --------------------------------------------------------------------------
    def set_grid(self, grid: Grid, marks: dict, culprits: dict, row: int = 0, col: int = 0) -> None:
        self.grid, self.marks, self.culprits = grid, marks, culprits
        self._resize()
        self.move_to(row, col)
        self.refresh()

    def _resize(self) -> None:
        g = self.grid
        if g is None:
            self.virtual_size = Size(0, 0)
            return
        width, height = self.container_size
        if len(g) + 1 > height:  # rows overflow: the vertical scrollbar takes its share
            width -= self.styles.scrollbar_size_vertical
        self.col_w = column_width(len(g.columns), width)
        self.virtual_size = Size(GUTTER + self.col_w * len(g.columns), len(g) + 1)

    def toggle_fold(self) -> None:
        if self.grid is None or not self.grid.columns:
            return
        col = self.grid.toggle_fold(self.cursor_col)
        self._resize()
        self.move_to(self.cursor_row, col)
        self.refresh()

    def show_rank(self, rank: int) -> bool:
        if self.grid is None or rank not in self.grid.fold_of:
            return False
        col = self.grid.expand_rank(rank)
        self._resize()
        self.move_to(self.cursor_row, col)
        self.refresh()
        return True

    # -- cursor ------------------------------------------------------------------------
    def move_to(self, row: int, col: int) -> None:
        g = self.grid
        if g is None:
            return
        row = max(0, min(row, len(g) - 1))
        col = max(0, min(col, len(g.columns) - 1))
        self.cursor_row, self.cursor_col = row, col
        self._scroll_into_view()
        self.post_message(CursorMoved(row, col))

    def _scroll_into_view(self) -> None:
        h = max(self.size.height - 1 - (1 if self.show_horizontal_scrollbar else 0), 1)
        col_w = self.col_w
        w = max(self.scrollable_content_region.width - GUTTER, col_w)
        x, y = self.scroll_offset
        if self.cursor_row < y:
            y = self.cursor_row
        elif self.cursor_row >= y + h:
            y = self.cursor_row - h + 1
        left = self.cursor_col * col_w
        if left < x:
            x = left
        elif left + col_w > x + w:
            x = left + col_w - w
        self.scroll_to(x, y, animate=False, immediate=True)

    def watch_cursor_row(self) -> None:
        self.refresh()

    def watch_cursor_col(self) -> None:
        self.refresh()

    def watch_step_mode(self) -> None:
        self.refresh()

    def action_move(self, drow: int, dcol: int) -> None:
        self.move_to(self.cursor_row + drow, self.cursor_col + dcol)

    def action_page(self, direction: int) -> None:
        page = max(self.size.height - 2, 1)
        self.scroll_to(y=self.scroll_offset.y + direction * page, animate=False, immediate=True)
        self.move_to(self.cursor_row + direction * page, self.cursor_col)

    def action_edge(self, direction: int) -> None:
        self.move_to(0 if direction < 0 else len(self.grid or ()) - 1, self.cursor_col)

    def action_toggle_fold(self) -> None:
        self.toggle_fold()

    def on_resize(self) -> None:
        if self.grid is not None:
            self._resize()
            self._scroll_into_view()
            self.refresh()

    # -- rendering ---------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        g = self.grid
        if g is None or not g.columns:
            return Strip([Segment(" " * width)]) if y else Strip([Segment(set_cell_size(" no collectives in this view", width))])
        sx, sy = self.scroll_offset
        col_w = self.col_w
        first = sx // col_w
        last = min(len(g.columns), (sx + width - GUTTER) // col_w + 1)
        base = Style(bgcolor="grey11") if y == 0 else Style()
        if y == self.scrollable_content_region.height - 1:  # whole page rendered: for the benchmark
            self.painted = (sy, time.perf_counter())
        if y == 0:
            name = one_line(g.group) if g.group is not None else "all"
            head = [Segment(set_cell_size(f" {name}"[: GUTTER - 1], GUTTER - 1),
                            Style(bold=True)), Segment("│", Style(color="grey35"))]
            segs = []
            for c in range(first, last):
                col = g.columns[c]
                fold = "▸ " if len(col.ranks) > 1 else ("▾ " if col.expanded else "")
                style = Style(bold=True, reverse=c == self.cursor_col)
                segs.append(Segment(set_cell_size(f" {fold}{col.title}", col_w - 1), style))
                segs.append(Segment("│", Style(color="grey35")))
            return self._join(head, segs, sx - first * col_w, width, base)
        row = sy + y - 1
        if row >= len(g):
            return Strip([Segment(" " * width)])
        grp, k = g.slot(row)
        mark = self.marks.get(row, " ")
        label = f"{mark}{'' if g.group is not None else one_line(grp) + ':'}#{g.number(grp, k)}"
        future = self.step_mode and row > self.cursor_row
        gstyle = Style(reverse=row == self.cursor_row, bold=bool(mark.strip()), color="red" if mark.strip() else None)
        head = [Segment(set_cell_size(label, GUTTER - 1), gstyle), Segment("│", Style(color="grey35"))]
        segs = []
        culprits = self.culprits.get(row, ())
        for c in range(first, last):
            col = g.columns[c]
            status = g.status(col.rep, row)
            # ranks of one fold have identical signatures here: decode the fold's first rank only
            rep = g.folds[col.fold][0]
            text = g.cell(rep, row, status, col_w - 3)  # a space either side, then the separator
            style = Style.parse(STATUS[status][1])
            if culprits and any(r in culprits for r in col.ranks):
                style += Style(underline=True)
            if future:
                style = Style(color="grey42")
            if row == self.cursor_row and c == self.cursor_col:
                style += Style(reverse=True)
            segs.append(Segment(set_cell_size(" " + text, col_w - 1), style))
            segs.append(Segment("│", Style(color="grey35")))
        return self._join(head, segs, sx - first * col_w, width, Style())

    @staticmethod
    def _join(head: list, body: list, skip: int, width: int, style: Style) -> Strip:
        """The fixed gutter, then the visible part of the scrolled columns."""
        body_strip = Strip(body).crop(skip, skip + max(width - GUTTER, 0))
        return Strip.join([Strip(head), body_strip]).extend_cell_length(width, style).crop(0, width)
