"""Synthetic programs: random valid collective sequences (`Program` of `Op`s) and the faults
that can be injected into one rank (`Fault`, with the finding the analysis must report first)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import NamedTuple

SUM, MIN, MAX = 0, 3, 4
USER_FILE = "/synth/train.py"
INTERNAL_FILE = "/synth/torch/nn/parallel/distributed.py"
ROLE = "gradient bucket"
# Sizes a program uses: all even, so `shape + 1` (the shape fault) is never one of them.
SIZES = (2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096)
DTYPES = ("float32", "bfloat16", "float16")  # never an integer dtype: the dtype fault makes one
# dtype fault: same element count, another dtype no program uses
DTYPE_SWAP = {"float32": "int32", "bfloat16": "int16", "float16": "int16"}
FAULT_KINDS = ("missing", "extra", "op_mismatch", "shape_mismatch", "dtype_mismatch", "reduce_op_mismatch",
               "root_mismatch", "order_mismatch", "unmatched_p2p", "tag_mismatch", "semantic_mismatch", "detour")
# the user's frames above a call site: the training loop reaches the loop body, main the one-off calls;
# a call some ranks reach through another helper every time (an `if rank % 2:` around it) is valid
LOOP_CHAIN = ((USER_FILE, 500, "main"), (USER_FILE, 510, "train_step"))
ONCE_CHAIN = ((USER_FILE, 400, "main"),)
BRANCH_CHAIN = ((USER_FILE, 500, "main"), (USER_FILE, 520, "odd_rank_step"))


@dataclass(frozen=True)
class Op:
    """One collective of the program (issued by every member of `group`) or one P2P message."""

    op: str  # wire op; "p2p" for a send/recv pair
    group: str
    tensors: tuple = ()  # ((dtype, shape), ...)
    reduce_op: int | None = None
    root: int | None = None  # group-local root of rooted ops
    site: int = 0  # index into Program.sites
    role: str | None = None
    label: str | None = None
    native: bool = False
    src: int | None = None  # P2P: global ranks
    dst: int | None = None
    recv_site: int = 0
    outer: tuple = ()  # the chain above the call site: (file, line, function) outermost first
    odd_outer: tuple | None = None  # the chain odd ranks reach it by, every time (None: `outer`)

    def chain(self, rank: int) -> tuple:
        return self.odd_outer if self.odd_outer is not None and rank % 2 else self.outer

    def key(self, role=...):
        """What the analysis compares (Signature minus api/tag, which the generator keeps default)."""
        return (self.op, self.tensors, self.reduce_op, self.root, self.role if role is ... else role)


@dataclass
class Program:
    world: int
    groups: dict  # name -> tuple of global ranks (group rank = index); "0" is the world
    sites: list  # [(file, line, function)]
    ops: list = field(default_factory=list)
    run_id: str = "synth"

    def members(self, name: str) -> tuple:
        return self.groups[name]

    def issuers(self, op: Op) -> tuple:
        if op.op == "p2p":
            return (op.src, op.dst)
        return self.groups[op.group]

    def group_sequence(self, name: str) -> list[int]:
        """Indices into ops of the group's collectives (not P2P), in issue order."""
        return [i for i, o in enumerate(self.ops) if o.group == name and o.op != "p2p"]

    def add_site(self, line: int | None = None, func: str = "train_step", file: str = USER_FILE) -> int:
        self.sites.append((file, line if line is not None else 100 + len(self.sites), func))
        return len(self.sites) - 1


# ----------------------------------------------------------------------------------------
# program generation


def _tensor(rng: random.Random, n: int = 1) -> tuple:
    out = []
    for _ in range(n):
        dt = rng.choice(DTYPES)
        shape = (rng.choice(SIZES),) if rng.random() < 0.7 else (rng.choice(SIZES[:5]), rng.choice(SIZES[:5]))
        out.append((dt, shape))
    return tuple(out)


def _template(rng: random.Random, prog: Program, group: str, p2p: bool, coalesced: bool) -> Op:
    members = prog.groups[group]
    kinds = ["allreduce_", "allreduce_", "broadcast_", "allgather_", "reduce_", "barrier", "bucket"]
    if coalesced:
        kinds.append("allreduce_coalesced_")
    if p2p and len(members) >= 2:
        kinds += ["p2p", "p2p"]
    kind = rng.choice(kinds)
    site = prog.add_site()
    if kind == "allreduce_":
        return Op("allreduce_", group, _tensor(rng), rng.choice((SUM, SUM, MAX)), site=site)
    if kind == "bucket":  # DDP's C++ reducer: native, async, with a purpose role
        return Op("allreduce_", group, _tensor(rng), SUM, site=site, role=ROLE, label="DDP backward bucket 0",
                  native=True)
    if kind == "allreduce_coalesced_":
        return Op("allreduce_coalesced_", group, _tensor(rng, rng.randint(2, 4)), SUM, site=site)
    if kind == "broadcast_":
        return Op("broadcast_", group, _tensor(rng), root=rng.randrange(len(members)), site=site)
    if kind == "reduce_":
        return Op("reduce_", group, _tensor(rng), SUM, root=rng.randrange(len(members)), site=site)
    if kind == "allgather_":
        (t,) = _tensor(rng)
        return Op("allgather_", group, (t,) * len(members), site=site)
    if kind == "barrier":
        return Op("barrier", group, (), site=site)
    src, dst = rng.sample(members, 2)
    return Op("p2p", group, _tensor(rng), site=site, src=src, dst=dst, recv_site=prog.add_site(func="recv_step"))


def generate_program(rng: random.Random, world: int, n_ops: int, groups=2, p2p: bool = True,
                     coalesced: bool = True) -> Program:
    """A valid program: a few one-off calls, then a loop body (reused call sites) run many times.

    groups: number of random subgroups, or a list of member lists. Subgroups are named
    "1", "2", ... like torch names them; their collectives are issued by members only."""
    prog = Program(world, {"0": tuple(range(world))}, [])
    if isinstance(groups, int):
        specs = []
        for _ in range(groups if world >= 2 else 0):
            size = rng.randint(2, world) if world > 2 else 2
            specs.append(sorted(rng.sample(range(world), size)))
    else:
        specs = [sorted(g) for g in groups]
    for i, members in enumerate(specs, 1):
        prog.groups[str(i)] = tuple(members)
    names = list(prog.groups)

    def any_template():
        return _template(rng, prog, rng.choice(names), p2p, coalesced)

    branches = random.Random(world * 7919 + n_ops)  # (not `rng`: the ops are those of a program without chains)

    def looped():
        op = replace(any_template(), outer=LOOP_CHAIN)
        return replace(op, odd_outer=BRANCH_CHAIN) if branches.random() < 0.2 else op

    prologue = [replace(any_template(), outer=ONCE_CHAIN) for _ in range(rng.randint(0, 3))]
    body = [looped() for _ in range(rng.randint(1, 6))]
    epilogue = [replace(any_template(), outer=ONCE_CHAIN) for _ in range(rng.randint(0, 2))]
    ops = list(prologue)
    while len(ops) < n_ops - len(epilogue):
        for t in body:
            if rng.random() < 0.1:  # a conditional call inside the loop (same on every rank)
                continue
            ops.append(t)
    ops = ops[: max(n_ops - len(epilogue), 0)] + epilogue
    prog.ops = ops
    return prog


# ----------------------------------------------------------------------------------------
# faults


class Expected(NamedTuple):
    kind: str
    group: str
    position: int
    ranks: list


@dataclass(frozen=True)
class Fault:
    """One rank deviates at program op `index` (see module docstring for the kinds).

    missing: `rank` skips op `index`; extra: `rank` issues an all_reduce from a new call
    site just before op `index` (index == len(ops): at the end) in group `group`;
    order_mismatch: `rank` swaps op `index` with the next collective of its group;
    unmatched_p2p: the receiver of P2P op `index` never posts the recv; tag_mismatch: it
    posts the recv with another tag; semantic_mismatch:
    op `index` carries a purpose role on every rank but `rank`; detour: `rank` reaches op `index`'s
    call site through a chain no rank took before (an extra pass); the rest change one field
    of `rank`'s op `index`."""

    kind: str
    rank: int
    index: int
    group: str | None = None  # extra only

    def expect(self, prog: Program) -> Expected:
        if self.kind == "unmatched_p2p":
            op = prog.ops[self.index]
            # the receiver never posted it: the send left unmatched blames the receiver
            return Expected("unmatched_p2p", op.group, _p2p_position(prog, self.index), [op.dst])
        if self.kind == "tag_mismatch":
            op = prog.ops[self.index]
            return Expected("tag_mismatch", op.group, _p2p_messages(prog, self.index).index(self.index),
                            sorted({op.src, op.dst}))
        if self.kind == "extra":
            group = self.group
            position = sum(1 for i in prog.group_sequence(group) if i < self.index)
        else:
            group = prog.ops[self.index].group
            position = prog.group_sequence(group).index(self.index)
        members = prog.groups[group]
        ranks = [self.rank]
        if self.kind == "detour":
            return Expected("semantic_mismatch", group, position, ranks)
        if len(members) == 2 and self.kind not in ("missing", "extra", "semantic_mismatch"):
            # no majority (align.py): a torch-internal call (one with a purpose role) is the
            # reference, else the lowest rank's; the other rank is blamed
            seq = prog.group_sequence(group)
            theirs = prog.ops[seq[position]]
            mine = prog.ops[seq[position + 1]] if self.kind == "order_mismatch" else theirs
            other = [r for r in members if r != self.rank][0]
            if (theirs.role is None) != (mine.role is None):
                ranks = [self.rank] if theirs.role is not None else [other]
            else:
                ranks = [max(members)]
        return Expected(self.kind, group, position, ranks)


def _p2p_messages(prog: Program, index: int) -> list[int]:
    op = prog.ops[index]
    return [i for i, o in enumerate(prog.ops) if o.op == "p2p" and (o.group, o.src, o.dst) == (op.group, op.src, op.dst)]


def _p2p_position(prog: Program, index: int) -> int:
    """With recv k dropped, recvs k+1.. pair with sends k..; the first send left alone is reported
    (all later messages of the pair have the same tensors: see fault_candidates)."""
    msgs = _p2p_messages(prog, index)
    return len(msgs) - 1


def _mutate(prog: Program, kind: str, op: Op) -> Op | None:
    """The culprit's version of `op` for a field fault, or None when the fault does not apply."""
    if op.op == "p2p":
        return None
    if kind == "op_mismatch":
        new = "_allgather_base_" if op.op != "_allgather_base_" else "allreduce_"
        return replace(op, op=new, reduce_op=None, root=None)
    if kind == "shape_mismatch":
        if not op.tensors:
            return None
        (dt, shape), *rest = op.tensors
        return replace(op, tensors=((dt, (shape[0] + 1,) + tuple(shape[1:])), *rest))
    if kind == "dtype_mismatch":
        if not op.tensors:
            return None
        return replace(op, tensors=tuple((DTYPE_SWAP[d], s) for d, s in op.tensors))
    if kind == "reduce_op_mismatch":
        if op.reduce_op is None:
            return None
        return replace(op, reduce_op=MIN)
    if kind == "root_mismatch":
        if op.op != "broadcast_":
            return None
        return replace(op, root=(op.root + 1) % len(prog.groups[op.group]))
    raise ValueError(kind)


def fault_candidates(prog: Program, kind: str) -> list[Fault]:
    """Every fault of `kind` whose first finding is unambiguous (see the comments)."""
    out = []
    ops = prog.ops
    if kind == "extra":
        for name, members in prog.groups.items():
            for r in members:
                # before any op of the program, or at the end
                for i in range(len(ops) + 1):
                    out.append(Fault("extra", r, i, name))
        return out
    if kind == "tag_mismatch":  # the receiver of a message uses another tag
        return [Fault(kind, op.dst, i) for i, op in enumerate(ops) if op.op == "p2p"]
    if kind == "unmatched_p2p":
        for i, op in enumerate(ops):
            if op.op != "p2p":
                continue
            msgs = _p2p_messages(prog, i)
            k = msgs.index(i)
            # dropping recv k shifts the later recvs onto earlier sends: keep the pairs' tensors equal
            if all(ops[j].tensors == op.tensors for j in msgs[k:]):
                out.append(Fault("unmatched_p2p", op.dst, i))
        return out
    for name, members in prog.groups.items():
        seq = prog.group_sequence(name)
        keys = [ops[i].key() for i in seq]
        for p, i in enumerate(seq):
            op = ops[i]
            for r in members:
                if kind == "missing":
                    # the first difference is at p only if the next collective differs; the culprit
                    # must execute the call site elsewhere (else, with two members, it reads as the
                    # other rank's extra call)
                    if p + 1 < len(seq) and keys[p + 1] == keys[p]:
                        continue
                    # two members: a skipped call is as much one more on the other rank, which
                    # blame.py tells apart by the loop the program runs; a random program is no
                    # loop (tests/unit/analysis/test_blame_properties.py draws loops for two ranks)
                    if len(members) == 2:
                        continue
                    if not any(o.site == op.site and j != i and r in prog.issuers(o) for j, o in enumerate(ops)):
                        continue
                    out.append(Fault(kind, r, i))
                elif kind == "order_mismatch":
                    if p + 1 < len(seq) and keys[p + 1] != keys[p]:
                        out.append(Fault(kind, r, i))
                elif kind == "semantic_mismatch":
                    if op.op == "allreduce_" and len(members) >= 2:
                        out.append(Fault(kind, r, i))
                elif kind == "detour":
                    # every member met on this call site's chain in an earlier slot of the group
                    if op.odd_outer is None and op.outer and any(ops[j] == op for j in seq[:p]):
                        out.append(Fault(kind, r, i))
                else:
                    if _mutate(prog, kind, op) is not None and len(members) >= 2:
                        out.append(Fault(kind, r, i))
    return out
