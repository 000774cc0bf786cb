"""Synthetic runs in the real log format: random valid programs, injected faults, bulk benchmark runs.

Used by the property tests (tests/unit/analysis/test_matcher_properties.py) and the benchmark
(`benchmarks/bench_diff.py`, `benchmarks/bench_tui.py`). Logs are written with the recorder's own
`LogWriter`, record by record, exactly as `Recorder` lays them out: header, interned
strings / sites / tensor specs, group records, `C` records, `D` records, trailer.

A `Program` is the ground truth: a list of `Op`s in global issue order. A collective op
is issued by every member of its group; a P2P op is a send on `src` (peer = the group
rank of `dst`) and a recv on `dst` (peer = the group rank of `src`). `write_run` turns
it into one log per rank, after applying `Fault`s to single ranks; `Fault.expect`
says which finding the analysis must report first.
"""

from .bulk import write_clean_run, write_groups_run
from .logs import rank_events, write_run
from .program import (
    DTYPES,
    FAULT_KINDS,
    INTERNAL_FILE,
    ROLE,
    SIZES,
    USER_FILE,
    Expected,
    Fault,
    Op,
    Program,
    fault_candidates,
    generate_program,
)

__all__ = ["DTYPES", "FAULT_KINDS", "INTERNAL_FILE", "ROLE", "SIZES", "USER_FILE", "Expected", "Fault", "Op",
           "Program", "fault_candidates", "generate_program", "rank_events", "write_clean_run", "write_groups_run",
           "write_run"]
