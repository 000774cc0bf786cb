"""A lint finding: a call that issues collectives, run only on the ranks a per-rank condition
lets through, with the chain that makes it so and the fix."""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field

from ..knowledge import fixes
from .syntax import alike
from .values import LOCAL, Origin

RULE = "rank-branch"
ROOT_RULE = "rank-root"  # a collective whose root (src/dst) differs per rank
SHAPE_RULE = "rank-shape"  # a collective of a tensor whose shape (or split sizes) may differ per rank
P2P_RULE = "p2p-order"  # every rank sends first to its peer with a blocking call: no receive is ever posted

HOW = {"branch": "inside `{text}` (line {line})",
       "else": "in the else of `{text}` (line {line})",
       "exit": "after `{text}` (line {line}) may leave early on some ranks",
       "loop": "in `{text}` (line {line}), whose iterations (their number or order) differ per rank",
       "while": "in `{text}` (line {line}), whose condition differs per rank",
       "decorator": "in a function decorated `{text}` (line {line}): it runs on some ranks only",
       "root": "with its root `{text}` (line {line})",
       "shape": "of `{text}` (line {line})",
       "splits": "with output split sizes `{text}` (line {line})",
       "p2p": "before `{text}` (line {line})"}


@dataclass(frozen=True)
class Guard:
    """A condition some ranks pass and others do not, and how the calls under it depend on it."""

    kind: str  # values.RANK or values.LOCAL
    path: str
    line: int
    text: str  # the header's source: "if rank == 0:", "@rank_zero_only"
    how: str  # a key of HOW
    origin: Origin
    members: str | None = None  # the ranks the condition lets through, as source (`rank in ranks`)
    test: ast.AST | None = field(default=None, compare=False)  # the condition itself
    mesh_dim: str | None = None  # the DeviceMesh dimension whose coordinate the condition reads
    doubt: str = ""  # why calls under it may issue alike on every rank after all (a warning, not an error)


@dataclass
class Finding:
    path: str
    line: int  # the call under the condition
    col: int
    call: str  # its source
    api: str  # what it issues, named the way its framework does
    branch_path: str
    branch_line: int
    branch: str  # the condition's source
    how: str
    kind: str  # "rank" or "local"
    why: str  # where the per-rank value comes from
    fix: str
    chain: list = field(default_factory=list)  # [(path, line, text)] from the call down to the collective
    framework: str = "torch.distributed"
    rule: str = RULE
    maybe: bool = field(default=False, repr=False)  # its call issues collectives only sometimes (DDP's forward)
    sometimes: bool = field(default=False, repr=False)  # ... only in some configurations (Api.sometimes)
    subgroup: bool = field(default=False, repr=False)  # (rank-root) on a group other than the default one
    doubt: str = field(default="", repr=False)  # the condition's own reason for a warning (Guard.doubt)

    @property
    def certain(self) -> bool:
        """An error: the call certainly issues collectives, under a condition on the rank itself. A
        warning otherwise: what it issues depends on the runtime (placements, the wrapping, DDP's
        buffers), or the condition is on this rank's data, which the program may have made the same
        on every rank in a way lint does not follow; or a root taken from the rank on a subgroup
        (where a rank-derived root may be the same on each of its members: a node's first rank)."""
        return not self.maybe and not self.sometimes and self.kind != LOCAL and not self.subgroup and \
            self.rule != SHAPE_RULE and not self.doubt

    @property
    def severity(self) -> str:
        return "error" if self.certain else "warning"

    @property
    def uncertain(self) -> str:
        """Why a warning is not an error ('' for an error)."""
        if self.maybe or self.sometimes:
            return "whether it issues collectives depends on the runtime"
        if self.kind == LOCAL:
            return "whether this rank's data differs from the others' at run time is not known from the source"
        if self.subgroup:
            return "on a subgroup a root derived from the rank may be the same on each of its members"
        if self.rule == SHAPE_RULE:
            return "values that differ per rank may still give the same shape (or split sizes) everywhere"
        return self.doubt

    @property
    def message(self) -> str:
        where = HOW[self.how].format(text=self.branch, line=self.branch_line)
        what = "rank" if self.kind != LOCAL else "this rank's data"
        if self.rule == SHAPE_RULE:
            if self.how == "splits":
                return (f"`{self.call}` issues {self.api} {where}, which this rank computed from its own {what} "
                        f"({self.why}) rather than received from its peers: they must equal what each peer sends it")
            return (f"`{self.call}` issues {self.api} {where}, whose shape comes from {what} ({self.why}): the ranks "
                    "may give tensors of different shapes, which the collective needs alike")
        if self.rule == P2P_RULE:
            return (f"`{self.call}` {where} on every rank alike, to a peer taken from the rank ({self.why}): each "
                    "rank blocks in its send while its peer blocks in its own, and neither reaches its receive")
        if self.rule == ROOT_RULE:
            return (f"`{self.call}` issues {self.api} {where}, which depends on {what} ({self.why}): the ranks "
                    "name different roots, so they disagree on who sends and the job hangs or mismatches")
        return (f"`{self.call}` issues {self.api} {where}: the condition depends on {what} ({self.why}), "
                "so the other ranks never issue it and the job hangs or mismatches")

    def key(self) -> tuple:
        return (self.path, self.line, self.branch_path, self.branch_line)


def local_fix(guard: Guard, api_fix: str) -> str:
    """The fix of a call under a condition on this rank's own data (knowledge/fixes.py)."""
    return fixes.same_iterations(api_fix) if guard.how == "loop" else fixes.decide_alike(api_fix)


BARRIERS = frozenset({"dist.barrier()", "dist.monitored_barrier()", "deepspeed.comm.barrier()",
                      "accelerator.wait_for_everyone()", "wait_for_everyone()", "fabric.barrier()",
                      "trainer.strategy.barrier()"})
_OPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_RANKS = range(8)


def complementary(a: ast.AST, b: ast.AST) -> bool:
    """Whether every rank passes exactly one of two conditions on the same rank value: the
    "main process first" idiom, `if local_rank not in (-1, 0): barrier()` ... `if local_rank == 0:
    barrier()`, where each rank reaches one barrier of the pair."""
    if _negated(a, b) or _negated(b, a):
        return True  # `if not is_main:` ... `if is_main:`
    subject, other = _subject(a), _subject(b)
    if subject is None or other is None or not alike(subject, other):
        return False
    try:
        return all(holds(a, r) != holds(b, r) for r in _RANKS)
    except (TypeError, ValueError, KeyError):
        return False


def _negated(a, b) -> bool:
    return isinstance(b, ast.UnaryOp) and isinstance(b.op, ast.Not) and alike(b.operand, a)


def _subject(test) -> ast.AST | None:
    for node in ast.walk(test):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and not isinstance(node.left, ast.Constant):
            return node.left
    return None


def holds(test, rank: int) -> bool:
    """Whether a condition on one rank value holds for `rank` (ValueError: not such a condition)."""
    if isinstance(test, ast.BoolOp):
        parts = [holds(v, rank) for v in test.values]
        return all(parts) if isinstance(test.op, ast.And) else any(parts)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return not holds(test.operand, rank)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return _OPS[type(test.ops[0])](rank, ast.literal_eval(test.comparators[0]))
    raise ValueError("not a condition on one rank value")
