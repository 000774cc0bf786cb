"""The abstract value of a Python expression, as far as the lint cares: does it differ per rank
(its rank, or this rank's data), which parameters it comes from, and whether it is a wrapped
module (whose forward and backward issue collectives) or the output of one."""

from __future__ import annotations

from dataclasses import dataclass

RANK, LOCAL = "rank", "local"


@dataclass(frozen=True)
class Origin:
    """Where a per-rank value comes from: shown as the finding's `why`."""

    kind: str  # RANK or LOCAL
    path: str
    line: int
    text: str  # "dist.get_rank()", "parameter `rank`", "torch.isnan(loss)"
    # uniform tests (as truths.key) and truth values under which this value is the same on every
    # rank: set under `not F or rank == 0` it is alike where F is false; re-synced under `if F:` it
    # is alike where F is true. A use where the program knows one of them reads it as uniform.
    unless: frozenset = frozenset()
    doubt: str = ""  # why a test on it may hold alike on every rank after all (a warning's reason)


@dataclass(frozen=True)
class Val:
    rank: Origin | None = None
    local: Origin | None = None
    params: frozenset = frozenset()  # indices of the enclosing function's parameters it depends on
    wrapped: str | None = None  # "DDP", "FSDP", ...: a module whose calls issue collectives
    output_of: str | None = None  # the wrapped module whose forward this value comes from (its backward)
    typ: str | None = None  # "accelerator", "fabric", "engine", "trainer", "sampler", or a program class key
    members: str | None = None  # a process group's member list, as source (new_group's argument)
    sized: bool = False  # a collection whose length is the same on every rank, whatever its content
    shaped: Origin | None = None  # a tensor whose shape may differ per rank: where it got it (bincount, ...)
    items: tuple | None = None  # a tuple's values one by one (`return group, rank`), for unpacking
    opaque: bool = False  # per rank only through a call lint cannot read: how many items it has is unknown
    formatted: bool = False  # a string formatted from its parts (a file name): the rank in it names, not decides
    chosen: bool = False  # picked per rank (set in a rank branch, `a if rank == 0 else None`): None on some ranks

    @property
    def origin(self) -> Origin | None:
        return self.rank or self.local

    @property
    def varies(self) -> bool:
        return self.rank is not None or self.local is not None

    def data_only(self) -> Val:
        """The per-rank part alone: what flows into a value computed from this one."""
        if self.rank is None and self.local is None and not self.params and self.output_of is None:
            return CLEAN
        if self.wrapped is None and self.typ is None and self.members is None and not self.sized and \
                self.shaped is None and self.items is None and not self.chosen:
            return self  # (a value computed from a sized collection or a shaped tensor is neither itself)
        return Val(self.rank, self.local, self.params, output_of=self.output_of, opaque=self.opaque,
                   formatted=self.formatted)


CLEAN = Val()


def join(*vals: Val) -> Val:
    """What a value may be when it is any of these (branches joining, an expression of parts)."""
    vals = [v for v in vals if v is not None and v is not CLEAN and v != CLEAN]
    if not vals:
        return CLEAN
    first = vals[0]
    if len(vals) == 1 or all(v == first for v in vals[1:]):
        return first
    return Val(rank=next((v.rank for v in vals if v.rank), None),
               local=next((v.local for v in vals if v.local), None),
               params=frozenset().union(*(v.params for v in vals)),
               wrapped=next((v.wrapped for v in vals if v.wrapped), None),
               output_of=next((v.output_of for v in vals if v.output_of), None),
               typ=next((v.typ for v in vals if v.typ), None),
               members=first.members if all(v.members == first.members for v in vals) else None,
               sized=all(v.sized for v in vals), items=_join_items(vals),
               opaque=all(v.opaque for v in vals if v.rank), chosen=any(v.chosen for v in vals),
               formatted=any(v.formatted for v in vals))


def _join_items(vals: list) -> tuple | None:
    """Tuples of one length join item by item (`return [], None, rank` / `return g, h, rank`)."""
    first = vals[0].items
    if first is None or any(v.items is None or len(v.items) != len(first) for v in vals[1:]):
        return None
    return tuple(join(*parts) for parts in zip(*(v.items for v in vals)))


def combine(*vals: Val) -> Val:
    """A value computed from these: their per-rank parts, none of their module or type."""
    parts = [d for d in (v.data_only() for v in vals if v is not None) if d is not CLEAN]
    if not parts:
        return CLEAN
    return parts[0] if len(parts) == 1 else join(*parts)
