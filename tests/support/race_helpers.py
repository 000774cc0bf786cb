"""The one recording race the scenario and replay tests accept (see analysis/align.py).

Two ranks that issue two async collectives of different sizes in swapped order: gloo's size
check may abort a rank (SIGABRT) before its own thread has issued the second call. Its log
then ends inside the first, and the matcher reports that slot's own difference (a shape,
dtype or op mismatch on the same slot and ranks) instead of an order mismatch it cannot see.
"""

FIELD_KINDS = ("shape_mismatch", "dtype_mismatch", "op_mismatch")


def swap_cut_by_abort(want: tuple, got: tuple, crashed_ranks) -> bool:
    """`want`/`got`: (kind, group, position, ranks, ...) of the expected and reported first
    finding; true when they differ only by that race."""
    return (want[0] == "order_mismatch" and got[0] in FIELD_KINDS and tuple(got[1:]) == tuple(want[1:])
            and bool(set(crashed_ranks)))
