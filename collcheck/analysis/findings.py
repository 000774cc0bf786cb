"""Finding kinds, and what each does under NCCL and under gloo (sources in docs/findings.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..knowledge import fixes
from ..model import Event, Signature

# kind -> (title, severity, NCCL consequence, gloo consequence); the usual fix: knowledge/fixes.py
KINDS = {
    "missing": ("missing collective", "error",
                "the other ranks block in it until the NCCL watchdog timeout (default 10 min) aborts the job",
                "the other ranks block until the group timeout, then raise 'Timed out waiting ... for recv'; "
                "if the rank that skipped it has exited, they fail at once with 'Connection closed by peer'"),
    "extra": ("extra collective", "error",
              "the rank blocks in it forever, or it silently pairs with the next collective of the others",
              "the rank blocks until the group timeout, or pairs with the next collective of the others"),
    "op_mismatch": ("different collectives in the same slot", "error",
                    "undefined: NCCL does not check the op; usually a hang, or silent garbage when sizes agree "
                    "(barrier is a 1-element all-reduce and can pair with one)",
                    "gloo pairs ops by slot: a hang until the timeout or a size-mismatch abort"),
    "shape_mismatch": ("tensor size mismatch", "error",
                       "NCCL does not check sizes: reads/writes out of bounds, hangs or silent garbage",
                       "the receiving rank aborts with SIGABRT ('op.preamble.length <= op.nbytes'), "
                       "its peers get 'Connection reset by peer'"),
    "dtype_mismatch": ("dtype mismatch", "error",
                       "NCCL does not check dtypes: silent garbage (or a hang when byte counts differ)",
                       "equal byte counts complete silently with garbage; different ones abort like a size mismatch"),
    "split_mismatch": ("all-to-all split sizes disagree", "error",
                       "NCCL does not check sizes: out-of-bounds reads/writes, garbage or a hang",
                       "a rank whose split for itself differs raises at once ('inLengthPerRank[myRank] == "
                       "outLengthPerRank[myRank]'), one that receives more than it expects aborts with SIGABRT "
                       "('op.preamble.length <= op.nbytes'); their peers fail with 'Connection closed by peer'"),
    "reduce_op_mismatch": ("reduce op mismatch", "error",
                           "NCCL does not check the op: silently wrong results",
                           "gloo does not check the op: silently wrong results"),
    "root_mismatch": ("root / source rank mismatch", "error",
                      "several roots send and nobody receives, or vice versa: a hang or garbage",
                      "a hang until the timeout, or garbage"),
    "order_mismatch": ("same collectives in a different order", "error",
                       "NCCL matches by order: a hang (different sizes) or silently swapped data (same sizes)",
                       "gloo matches by order: a hang, a size-mismatch abort, or silently swapped data"),
    "group_mismatch": ("process groups created differently", "error",
                       "ranks disagree on group membership: the store rendezvous or the first collective hangs",
                       "the store rendezvous or the first collective hangs until the timeout"),
    "unmatched_p2p": ("unmatched point-to-point", "error",
                      "the send or recv blocks forever (or until the watchdog timeout)",
                      "the send or recv blocks until the timeout"),
    "tag_mismatch": ("send and recv tags differ", "error",
                     "NCCL ignores tags: the pair matches in order (silently, when sizes agree)",
                     "gloo pairs a recv only with a send of the same tag: both sides wait until the timeout, "
                     "or the recv takes a later message that has its tag"),
    "non_member_call": ("collective on a group the rank is not in", "error",
                        "torch skips the call on that rank (one warning): the group's members wait for a "
                        "member that never comes, or pair with its next call",
                        "the same: torch skips the call before any backend sees it"),
    "semantic_mismatch": ("calls that agree in shape but not in purpose", "error",
                          "NCCL pairs them silently: each side reads the other's value (wrong results, "
                          "or a later hang)",
                          "gloo pairs them silently: each side reads the other's value"),
    "hang": ("hang", "error",
             "ranks wait in collectives until the NCCL watchdog timeout",
             "ranks wait until the group timeout and raise"),
    "deadlock": ("deadlock (wait-for cycle)", "error",
                 "each rank of the cycle waits for the next (in another group, or in a send/recv): a permanent hang",
                 "a permanent hang until the group timeouts fire"),
}

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass
class Finding:
    kind: str
    group: str
    position: int  # slot in the group's sequence (majority numbering); -1 when not applicable
    ranks: list[int]  # culprits
    message: str
    events: dict[int, Event | None] = field(default_factory=dict)  # rank -> its event at the slot
    expected: Event | None = None  # the majority's event at the slot
    details: dict = field(default_factory=dict)
    time: int = 0  # earliest wall-clock us of the involved events, for ordering
    start: int = 0  # the group's first slot's sequence number (capped logs that dropped their start)

    @property
    def number(self) -> int:
        """The collective's sequence number in its group, as reports show it (#N)."""
        return self.position + self.start

    @property
    def title(self) -> str:
        return KINDS[self.kind][0]

    @property
    def severity(self) -> str:
        return KINDS[self.kind][1]

    @property
    def nccl(self) -> str:
        return KINDS[self.kind][2]

    @property
    def gloo(self) -> str:
        return self.details.get("gloo_observed") or KINDS[self.kind][3]

    @property
    def fix(self) -> str:
        return self.details.get("fix") or fixes.BY_KIND[self.kind]


def field_mismatch(a: Signature, b: Signature) -> str:
    """The most telling difference between two signatures in the same slot."""
    if a.op != b.op:
        return "op_mismatch"
    if a.shapes != b.shapes:
        return "shape_mismatch"
    if a.dtypes != b.dtypes:
        return "dtype_mismatch"
    if a.reduce_op != b.reduce_op:
        return "reduce_op_mismatch"
    if a.root != b.root:
        return "root_mismatch"
    if a.role != b.role:
        return "semantic_mismatch"
    return "op_mismatch"  # api name or tag differ
