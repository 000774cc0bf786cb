"""The timeline grid behind the TUI: rows aligned by matched collective, ranks folded into columns.

Pure data (no Textual). Row k of a group is the k-th collective (P2P excluded, as in the
analysis) of that group on every member; in the merged view the rows of all groups are
interleaved in issue order. Everything here works on the in-memory signature ids of the
run (numpy views, no decoding); only `event()` decodes, and only what is on screen.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass

import numpy as np

from collcheck.analysis.align import p2p_signature_ids
from collcheck.analysis.fold import rank_ranges

# status -> (glyph, style)
STATUS = {
    "matched": ("✓", "green"),
    "mismatched": ("≠", "bold red"),
    "missing": ("✗", "bold red"),
    "extra": ("+", "bold yellow"),
    "pending": ("⧗", "bold magenta"),
    "failed": ("!", "bold magenta"),
    "after exit": ("·", "grey50"),
    "not member": (" ", "grey35"),
}
ENDED = ("finished", "raised", "killed", "missing-log")


@dataclass
class Column:
    """One timeline column: a set of ranks with identical sequences in the view."""

    ranks: list[int]
    fold: int  # index of the base (folded) column it comes from
    expanded: bool = False  # one rank shown out of an expanded fold

    @property
    def rep(self) -> int:
        return self.ranks[0]

    @property
    def title(self) -> str:
        if len(self.ranks) == 1:
            return f"rank {self.ranks[0]}"
        return f"ranks {rank_ranges(self.ranks)}"


class RankSeq:
    """One rank's collectives per group in the view: event indices and signature ids (numpy)."""

    def __init__(self, log, groups: list[str], p2p: np.ndarray):
        sig = np.frombuffer(log.sig, dtype=np.uint32) if len(log.sig) else np.zeros(0, np.uint32)
        self.idx: dict[str, np.ndarray] = {}
        self.sig: dict[str, np.ndarray] = {}
        for g in groups:
            ix = log.by_group.get(g)
            if ix is None:
                continue
            if isinstance(ix, range):
                ix = np.arange(ix.start, ix.stop, dtype=np.int64)
            else:
                ix = np.frombuffer(ix, dtype=np.uint32).astype(np.int64) if len(ix) else np.zeros(0, np.int64)
            s = sig[ix]
            if len(p2p):
                keep = ~np.isin(s, p2p)
                ix, s = ix[keep], s[keep]
            self.idx[g], self.sig[g] = ix, s
        self.unfinished = sorted(set(log.pending) | set(log.errors))

    def key(self, state: str) -> tuple:
        parts = [state]
        for g, s in self.sig.items():
            ix = self.idx[g]
            pos = np.searchsorted(ix, self.unfinished) if self.unfinished else []
            bad = tuple(int(p) for p, i in zip(pos, self.unfinished) if p < len(ix) and ix[p] == i)
            parts.append((g, s.tobytes(), bad))
        return tuple(parts)


class Grid:
    """Rows x columns of one view (`group` None: all groups merged in issue order)."""

    DECODE_CACHE = 4096

    def __init__(self, report, group: str | None):
        run = report.run
        self.run, self.report, self.group = run, report, group
        self.groups = [group] if group is not None else run.group_names()
        p2p = np.array(sorted(p2p_signature_ids(run)), dtype=np.uint32)
        members = set(run.group_members(group)) if group is not None else set(run.ranks)
        self.ranks = sorted(r for r in run.ranks if r in members) or sorted(run.ranks)
        self.states = {r: s.state for r, s in report.hang.states.items()}
        self.seqs: dict[int, RankSeq] = {}
        folds: dict[tuple, list[int]] = {}
        for r in self.ranks:
            seq = self.seqs[r] = RankSeq(run.ranks[r], self.groups, p2p)
            folds.setdefault(seq.key(self.states.get(r, "?")), []).append(r)
        self.folds = sorted(folds.values(), key=lambda rs: rs[0])
        self.fold_of = {r: k for k, rs in enumerate(self.folds) for r in rs}
        self.expanded: set[int] = set()
        self.columns: list[Column] = []
        self._layout_columns()
        self._build_rows()
        self._majority: dict[int, tuple] = {}
        self._events: OrderedDict = OrderedDict()

    # -- columns ---------------------------------------------------------------------
    def _layout_columns(self) -> None:
        cols = []
        for k, rs in enumerate(self.folds):
            if k in self.expanded and len(rs) > 1:
                cols += [Column([r], k, True) for r in rs]
            else:
                cols.append(Column(rs, k))
        self.columns = cols

    def toggle_fold(self, col: int) -> int:
        """Expand a folded column or fold an expanded one; returns the new index of the column."""
        fold = self.columns[col].fold
        rank = self.columns[col].rep
        self.expanded ^= {fold}
        self._layout_columns()
        return self.column_of(rank)

    def expand_rank(self, rank: int) -> int:
        fold = self.fold_of[rank]
        if len(self.folds[fold]) > 1:
            self.expanded.add(fold)
            self._layout_columns()
        return self.column_of(rank)

    def column_of(self, rank: int) -> int:
        return next(i for i, c in enumerate(self.columns) if rank in c.ranks)

    # -- rows ------------------------------------------------------------------------
    def _build_rows(self) -> None:
        """Rows (group, position); merged view: ordered by the earliest issue index of the slot."""
        reps = [rs[0] for rs in self.folds]
        gs, ps, keys = [], [], []
        for gi, g in enumerate(self.groups):
            n = max((len(self.seqs[r].idx.get(g, ())) for r in reps), default=0)
            if n == 0:
                continue
            key = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
            for r in reps:
                ix = self.seqs[r].idx.get(g)
                if ix is not None and len(ix):
                    np.minimum(key[: len(ix)], ix, out=key[: len(ix)])
            gs.append(np.full(n, gi, dtype=np.int32))
            ps.append(np.arange(n, dtype=np.int64))
            keys.append(key)
        if not gs:
            self.row_group, self.row_pos = np.zeros(0, np.int32), np.zeros(0, np.int64)
            return
        g, p, key = np.concatenate(gs), np.concatenate(ps), np.concatenate(keys)
        order = np.lexsort((p, g, key)) if len(gs) > 1 else np.arange(len(g))
        self.row_group, self.row_pos = g[order], p[order]
        self._row_of = None

    def __len__(self) -> int:
        return len(self.row_pos)

    def slot(self, row: int) -> tuple[str, int]:
        return self.groups[int(self.row_group[row])], int(self.row_pos[row])

    def row_of(self, group: str, position: int) -> int | None:
        if group not in self.groups:
            return None
        gi = self.groups.index(group)
        hits = np.nonzero((self.row_group == gi) & (self.row_pos == position))[0]
        return int(hits[0]) if len(hits) else None

    # -- cells -----------------------------------------------------------------------
    def index(self, rank: int, row: int) -> int | None:
        """The rank's event index at the row, or None (not a member / sequence ended)."""
        g, k = self.slot(row)
        ix = self.seqs[rank].idx.get(g)
        return int(ix[k]) if ix is not None and k < len(ix) else None

    def sig(self, rank: int, row: int) -> int | None:
        g, k = self.slot(row)
        s = self.seqs[rank].sig.get(g)
        return int(s[k]) if s is not None and k < len(s) else None

    def majority(self, row: int) -> tuple:
        """(majority signature id or None, ranks of the group) at the row, weighted by fold size."""
        m = self._majority.get(row)
        if m is None:
            g, _ = self.slot(row)
            votes: Counter = Counter()
            for rs in self.folds:
                if g in self.seqs[rs[0]].idx:
                    votes[self.sig(rs[0], row)] += len(rs)
            best = max(votes.items(), key=lambda kv: (kv[1], kv[0] is not None))[0] if votes else None
            m = self._majority[row] = (best, votes)
            if len(self._majority) > 20000:
                self._majority.clear()
        return m

    def status(self, rank: int, row: int) -> str:
        g, k = self.slot(row)
        seq = self.seqs[rank]
        if g not in seq.idx:
            return "not member"
        sig = self.sig(rank, row)
        best, _ = self.majority(row)
        if sig is None:
            if best is None:
                return "after exit"
            return "missing" if k == len(seq.idx[g]) else "after exit"
        i = self.index(rank, row)
        log = self.run.ranks[rank]
        if best is None:
            return "extra"
        if sig != best:
            return "mismatched"
        if i in log.errors:
            return "failed"
        if i in log.pending:
            return "pending"
        return "matched"

    def event(self, rank: int, row: int):
        i = self.index(rank, row)
        if i is None:
            return None
        key = (rank, i)
        ev = self._events.get(key)
        if ev is None:
            ev = self._events[key] = self.run.ranks[rank].event(i)
            if len(self._events) > self.DECODE_CACHE:
                self._events.popitem(last=False)
        return ev

    # -- step mode -------------------------------------------------------------------
    def step_states(self, row: int) -> list[tuple[list[int], str]]:
        """Every rank's state at the row's collective: folded [(ranks, text)]."""
        g, k = self.slot(row)
        members = [r for r in self.run.group_members(g) if r in self.run.ranks] or self.ranks
        reached = {r for r in members if r in self.seqs and k < len(self.seqs[r].idx.get(g, ()))}
        best, _ = self.majority(row)
        texts = {}
        for r in self.ranks:
            seq = self.seqs[r]
            if g not in seq.idx:
                texts[r] = f"not in group {g}"
                continue
            if r not in reached:
                st = self.states.get(r, "?")
                texts[r] = f"exited ({st}) before #{k}" if st in ENDED else f"stopped ({st}) before #{k}"
                continue
            i = self.index(r, row)
            log = self.run.ranks[r]
            op = self.run.signatures[self.sig(r, row)].op
            if i in log.pending or i in log.errors:
                absent = [m for m in members if m not in reached]
                differ = [m for m in reached if m != r and self.sig(m, row) != self.sig(r, row)]
                why = []
                if absent:
                    why.append(f"ranks {rank_ranges(absent)} (never issued it)")
                if differ:
                    why.append(f"ranks {rank_ranges(differ)} (issued another op)")
                how = "failed" if i in log.errors else "waiting"
                texts[r] = f"{how} in {op} #{k} of group {g}" + (" for " + ", ".join(why) if why else "")
            elif self.sig(r, row) != best:
                texts[r] = f"ran {op} #{k} (differs from the majority)"
            else:
                texts[r] = f"ran {op} #{k} (matched)"
        folded: dict[str, list[int]] = {}
        for r, t in texts.items():
            folded.setdefault(t, []).append(r)
        return sorted(((rs, t) for t, rs in folded.items()), key=lambda x: x[0][0])


def finding_row(grid: Grid, finding) -> int | None:
    if finding.position is None or finding.position < 0 or finding.details.get("p2p") \
            or finding.kind in ("unmatched_p2p", "group_mismatch"):
        return None
    return grid.row_of(finding.group, finding.position)
