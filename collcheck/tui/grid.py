"""The timeline grid behind the TUI: rows aligned by matched collective, ranks folded into columns.

A view-model over the run model (no Textual, no log reading). Row k of a group is slot k of
the model's group sequences (P2P left out, as the matcher counts); point-to-point messages get
rows of their own, one per channel (group, src, dst) of the model: message k is the src's k-th
send and the dst's k-th recv on it. In the merged view the rows of all groups are interleaved
in issue order. Everything here works on signature ids (numpy views, no decoding); only
`event()` decodes, and only what is on screen.

Which cells are wrong is the analysis' word (`report.verdicts`, analysis/verdicts.py), never a
vote here: a cell is marked only where a finding blames its rank. Past a group's first judged
slot the ranks' positions may no longer line up, so cells there claim no match ("issued").
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..model import Channel, Sequences, rank_ranges
from .cells import STATUS, cell_text

__all__ = ["STATUS", "ENDED", "Column", "Grid", "channel_name", "finding_row"]

ENDED = ("finished", "raised", "killed", "missing-log")
QUIET = ("not member", "after exit", "not issued")  # statuses of no event


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
    """One rank's rows per group (or channel) of the view: the model's event indices and signature
    ids (array('I') or range, shared with the model: nothing copied per group)."""

    def __init__(self, log):
        self.log = log
        self.idx: dict[str, object] = {}
        self.sig: dict[str, array] = {}
        self.channels: list[str] = []
        self.unfinished = sorted(set(log.pending) | set(log.errors)) if log.pending or log.errors else []

    def add_channel(self, name: str, ix: list[int], sig: array) -> None:
        """The rank's sends (or recvs) of one point-to-point channel, as a pseudo-group."""
        self.idx[name], self.sig[name] = ix, sig
        self.channels.append(name)

    def _unfinished_at(self) -> dict[str, tuple]:
        """group -> the positions of the rank's unfinished events in it: each event looked up in
        its own group and the rank's channels only."""
        out: dict[str, list] = {}
        for i in self.unfinished:
            for g in [self.log.group_of(i), *self.channels]:
                ix = self.idx.get(g)
                if ix is not None:
                    p = bisect_left(ix, i)
                    if p < len(ix) and ix[p] == i:
                        out.setdefault(g, []).append(p)
        return {g: tuple(ps) for g, ps in out.items()}

    def key(self, state: str, contents: dict[tuple, int], numbers: dict[tuple, int], blamed: frozenset) -> tuple:
        """What ranks folded into one column share: state, groups, each group's signatures,
        where its unfinished events are and the slots where the analysis blames it. `contents`: the ids of a rank's signature arrays -> the
        number of their content in `numbers` (ranks read by kinds share arrays: joined once)."""
        arrays = self.sig.values()
        ids = tuple(map(id, arrays))
        content = contents.get(ids)
        if content is None:
            joined = b"".join([s.tobytes() if s.typecode == "I" else array("I", s).tobytes() for s in arrays])
            content = contents[ids] = numbers.setdefault((joined, array("Q", map(len, arrays)).tobytes()), len(numbers))
        bad = self._unfinished_at() if self.unfinished else {}
        return state, tuple(self.sig), content, frozenset(bad.items()), blamed


class Grid:
    """Rows x columns of one view (`group` None: all groups merged in issue order)."""

    DECODE_CACHE = 4096

    def __init__(self, report, group: str | None):
        run = report.run
        self.run, self.report, self.group = run, report, group
        self.groups = [group] if group is not None else run.group_names()
        self.sequences = report.sequences or Sequences(run)
        members = set(run.group_members(group)) if group is not None else set(run.ranks)
        self.ranks = sorted(r for r in run.ranks if r in members) or sorted(run.ranks)
        self.states = {r: s.state for r, s in report.hang.states.items()}
        self.seqs = {r: RankSeq(run.ranks[r]) for r in self.ranks}
        self._fill(self.sequences)
        self.channels: dict[str, tuple] = {}  # pseudo-group name -> (group, src, dst)
        self._cmp = self._compare_keys(self.sequences.p2p_ids)
        self._add_channels()
        self.verdicts, self.judged_from, blamed = self._verdicts(report)
        folds: dict[tuple, list[int]] = {}
        contents: dict[tuple, int] = {}
        numbers: dict[tuple, int] = {}
        for r in self.ranks:
            key = self.seqs[r].key(self.states.get(r, "?"), contents, numbers, blamed.get(r, frozenset()))
            folds.setdefault(key, []).append(r)
        self.folds = sorted(folds.values(), key=lambda rs: rs[0])
        self.fold_of = {r: k for k, rs in enumerate(self.folds) for r in rs}
        self.expanded: set[int] = set()
        self.columns: list[Column] = []
        self._layout_columns()
        self._build_rows()
        self._member_sets: dict[str, frozenset] = {}
        self._events: OrderedDict = OrderedDict()

    def _fill(self, sequences: Sequences) -> None:
        """Each rank's sequences in the view's groups, in their order: a plain rank's from its
        events by group (Sequences.plain: nothing made per group), the others' from each group's
        sequences."""
        cut, plain = sequences.plain_signatures or {}, sequences.plain
        at = {g: k for k, g in enumerate(self.groups)}
        ordered: dict[int, list] = {}  # id of a rank's events by group -> its groups of the view, in order
        others = set()
        for r, seq in self.seqs.items():
            if r not in cut:
                others.add(r)
                continue
            by_group, sigs = plain[r], cut[r]
            mine = ordered.get(id(by_group))
            if mine is None:  # (ranks of a kind share it: sorted once)
                mine = ordered[id(by_group)] = sorted([g for g in by_group if g in at], key=at.__getitem__)
            for g in mine:
                seq.idx[g], seq.sig[g] = by_group[g], sigs[g]
        for g in self.groups if others else ():
            seqs = sequences.group(g)
            for r, ix in seqs.index.items():
                if r in others:
                    self.seqs[r].idx[g], self.seqs[r].sig[g] = ix, seqs.seq[r]

    def _verdicts(self, report) -> tuple[dict, dict, dict]:
        """The analysis' verdicts keyed by this view's (group or channel name, position), each
        group's first judged position, and rank -> the slots where it is blamed."""
        verdicts, first, blamed = {}, {}, {}
        for (group, position, src, dst), v in report.verdicts.items():
            name = group if src is None and dst is None else channel_name(Channel(group, src, dst))
            verdicts[name, position] = v
            first[name] = min(first.get(name, position), position)
            for r in v.kinds:
                blamed.setdefault(r, set()).add((name, position))
        return verdicts, first, {r: frozenset(s) for r, s in blamed.items()}

    # -- point-to-point channels -------------------------------------------------------
    def _compare_keys(self, p2p_ids: set[int]) -> list[int]:
        """signature id -> what cells compare: the id itself, or for P2P ops (a send facing its
        recv) the tensors only."""
        sigs = self.run.signatures
        keys = list(range(len(sigs)))
        by_tensors: dict = {}
        for i in sorted(p2p_ids):
            keys[i] = by_tensors.setdefault(sigs[i].tensors, len(sigs) + len(by_tensors))
        return keys

    def _add_channels(self) -> None:
        view_groups = set(self.groups)
        # a channel is shown when a rank of the view issued one of its messages
        chans = [ch for ch in self.sequences.channels.values() if ch.group in view_groups
                 and any(r in self.seqs and ch.indices(r) for r in (ch.src, ch.dst))]
        for ch in sorted(chans, key=channel_name):
            name = channel_name(ch)
            self.channels[name] = (ch.group, ch.src, ch.dst)
            for r in (ch.src, ch.dst):  # an end that never issued its side shows it as missing
                if r in self.seqs:
                    ix = ch.indices(r)
                    self.seqs[r].add_channel(name, ix, self.sequences.signature_ids(r, ix))
        self.groups = self.groups + sorted(self.channels)

    def members(self, g: str) -> list[int]:
        """Ranks of a group (or both ends of a channel) that have logs."""
        if g in self.channels:
            _, src, dst = self.channels[g]
            return [r for r in (src, dst) if r in self.run.ranks]
        return [r for r in self.run.group_members(g) if r in self.run.ranks]

    def is_member(self, rank: int, g: str) -> bool:
        """Whether the rank belongs to the group, whether or not it issued anything in it."""
        members = self._member_sets.get(g)
        if members is None:
            members = self._member_sets[g] = frozenset(self.members(g))
        return rank in members

    def same(self, a: int | None, b: int | None) -> bool:
        """Do two signature ids agree as cells (a send and its recv agree on tensors)?"""
        return a == b or (a is not None and b is not None and self._cmp[a] == self._cmp[b])

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
        """Rows (group, position); merged view: ordered by the earliest issue index of the slot.
        Each folded column's sequences are joined once, the rows keyed all at once (numpy)."""
        at = {g: k for k, g in enumerate(self.groups)}
        rows = np.zeros(len(self.groups), dtype=np.int64)  # per group: the most slots a column has
        columns = []  # per column: (its event indices joined, their groups, their lengths)
        for rs in self.folds:
            idx = self.seqs[rs[0]].idx
            joined = array("I")
            for ix in idx.values():
                joined.extend(ix if isinstance(ix, range) or getattr(ix, "typecode", "") == "I" else iter(ix))
            where = np.array([at[g] for g in idx], dtype=np.int64)
            lens = np.array([len(ix) for ix in idx.values()], dtype=np.int64)
            rows[where] = np.maximum(rows[where], lens)
            columns.append((joined, where, lens))
        shown = np.flatnonzero(rows)
        if not len(shown):
            self.row_group, self.row_pos = np.zeros(0, np.int32), np.zeros(0, np.int64)
            return
        counts = rows[shown]
        first = np.zeros(len(self.groups), dtype=np.int64)  # each group's first row
        first[shown] = np.cumsum(counts) - counts
        total = int(counts.sum())
        key = np.full(total, np.iinfo(np.int64).max, dtype=np.int64)
        for joined, where, lens in columns:
            if len(joined):
                row = np.repeat(first[where], lens) + np.arange(len(joined)) - np.repeat(np.cumsum(lens) - lens, lens)
                key[row] = np.minimum(key[row], np.frombuffer(joined, np.uint32))
        g = np.repeat(shown.astype(np.int32), counts)
        p = np.arange(total, dtype=np.int64) - np.repeat(first[shown], counts)
        order = np.lexsort((p, g, key)) if len(shown) > 1 else np.arange(total)
        self.row_group, self.row_pos = g[order], p[order]
        self._row_of = None

    def __len__(self) -> int:
        return len(self.row_pos)

    def number(self, group: str, k: int) -> int:
        """Slot k's sequence number as reports show it (capped logs start a group at `start`)."""
        return k if group in self.channels else k + self.sequences.group(group).start

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

    def verdict(self, row: int):
        """The analysis' verdict at the row (analysis/verdicts.SlotVerdict), None: none judged."""
        return self.verdicts.get(self.slot(row))

    def expected(self, row: int):
        """What the ranks in step issued at a judged row (an event), None elsewhere."""
        v = self.verdict(row)
        return v.expected if v is not None else None

    def status(self, rank: int, row: int) -> str:
        g, k = self.slot(row)
        seq = self.seqs[rank]
        if g not in seq.idx and not self.is_member(rank, g):
            return "not member"
        i = self.index(rank, row)
        v = self.verdicts.get((g, k))
        blamed = v.cell(rank, i is not None) if v is not None else None
        if blamed is not None:
            return blamed
        if i is None:
            return "after exit" if self.states.get(rank) in ENDED else "not issued"
        log = self.run.ranks[rank]
        if i in log.errors:
            return "failed"
        if i in log.pending:
            return "pending"
        return "matched" if k < self.judged_from.get(g, k + 1) or v is not None else "issued"

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

    def cell(self, rank: int, row: int, status: str, width: int | None = None) -> str:
        """The cell's words in `width` cells (only the event on screen decoded)."""
        return cell_text(self.event(rank, row) if status not in QUIET else None, status, width)

    def where(self, rank: int, row: int, status: str) -> str:
        """" at file:line" of the rank's event at the row, "" where it has none."""
        ev = self.event(rank, row) if status not in QUIET else None
        return f" at {ev.where()}" if ev is not None else ""

    # -- step mode -------------------------------------------------------------------
    def step_states(self, row: int) -> list[tuple[list[int], str]]:
        """Every rank's state at the row's collective: folded [(ranks, text)]."""
        g, k = self.slot(row)
        n = self.number(g, k)
        members = self.members(g) or self.ranks
        reached = {r for r in members if r in self.seqs and k < len(self.seqs[r].idx.get(g, ()))}
        v = self.verdicts.get((g, k))
        compared = v is not None or k < self.judged_from.get(g, k + 1)
        texts = {}
        for r in self.ranks:
            seq = self.seqs[r]
            if g not in seq.idx and not self.is_member(r, g):
                texts[r] = f"not in {'channel' if g in self.channels else 'group'} {g}"
                continue
            if r not in reached:
                st = self.states.get(r, "?")
                texts[r] = (f"exited ({st}) before #{n}" if st in ENDED else f"unknown from #{n} (recording stopped)"
                            if st == "recording-stopped" else f"stopped ({st}) before #{n}")
                continue
            i = self.index(r, row)
            log = self.run.ranks[r]
            op = self.run.signatures[self.sig(r, row)].op
            if i in log.pending or i in log.errors:
                absent = [m for m in members if m not in reached]
                differ = [m for m in reached if m != r and not self.same(self.sig(m, row), self.sig(r, row))]
                why = []
                if absent:
                    why.append(f"ranks {rank_ranges(absent)} (never issued it)")
                if differ:
                    why.append(f"ranks {rank_ranges(differ)} (issued another op)")
                how = "failed" if i in log.errors else "waiting"
                texts[r] = f"{how} in {op} #{n} of group {g}" + (" for " + ", ".join(why) if why else "")
            elif v is not None and r in v.kinds:
                texts[r] = f"ran {op} #{n} (out of step: {v.kinds[r].replace('_', ' ')})"
            else:
                texts[r] = f"ran {op} #{n}" + (" (matched)" if compared else "")
        folded: dict[str, list[int]] = {}
        for r, t in texts.items():
            folded.setdefault(t, []).append(r)
        return sorted(((rs, t) for t, rs in folded.items()), key=lambda x: x[0][0])


def channel_name(ch: Channel) -> str:
    """A channel's pseudo-group name in the TUI: "group·src→dst"."""
    return f"{ch.group}·{'?' if ch.src is None else ch.src}→{ch.dst}"


def finding_row(grid: Grid, finding) -> int | None:
    if finding.position is None or finding.position < 0 or finding.kind in ("group_mismatch", "non_member_call"):
        return None
    d = finding.details
    if d.get("p2p"):  # message k of a channel
        src, dst = d.get("src"), d.get("dst")
        return grid.row_of(channel_name(Channel(finding.group, src, dst)), finding.position)
    return grid.row_of(finding.group, finding.position)
