"""The run model every view reads: ranks' events (run.py), read by load.py, the orders they are lined up in
(sequences.py), rank lists and groups for people (ranks.py, groups.py).

Reports, the TUI and replay build on these names only; a change of the log format touches the
reader, the scanner and this package, never a view.
"""

from ..logfile.ops import P2P_OPS, ROOTED_OPS
from .groups import group_label
from .load import load_run, reads_by_kinds, stopped_ranks
from .ranks import members_text, rank_ranges
from .run import (
    DTYPE_SIZES,
    REDUCE_OPS,
    Event,
    Group,
    GroupCreation,
    RankLog,
    Run,
    Signature,
)
from .sequences import Channel, GroupSequences, Sequences

__all__ = ["DTYPE_SIZES", "P2P_OPS", "REDUCE_OPS", "ROOTED_OPS", "Channel", "Event", "Group", "GroupCreation",
           "GroupSequences", "RankLog", "Run", "Sequences", "Signature", "group_label", "load_run", "members_text",
           "rank_ranges", "reads_by_kinds", "stopped_ranks"]
