"""Deterministic synthetic runs for the TUI tests and docs (fixed times, pids, paths)."""

from __future__ import annotations

import os
import random
import shutil
import tempfile

import msgpack

from collcheck.logfile import format as lf
from collcheck.logfile.reader import read_log
from collcheck.synth import Program, generate_program, write_run

HANG_WORLD, HANG_STOP, HANG_RANK = 8, 20, 5


def write_hang_run(directory: str) -> str:
    """8 ranks; rank 5 exits cleanly before world collective #20, the others wait in it forever."""
    prog = generate_program(random.Random(17), HANG_WORLD, 40, groups=0, p2p=False, coalesced=False)
    os.makedirs(directory, exist_ok=True)
    tmp = tempfile.mkdtemp()
    try:
        early = Program(prog.world, prog.groups, prog.sites, prog.ops[:HANG_STOP], run_id="synth-hang")
        stuck = Program(prog.world, prog.groups, prog.sites, prog.ops[:HANG_STOP + 1], run_id="synth-hang")
        a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        write_run(a, early, done=True, trailer=True)
        write_run(b, stuck, done=True, trailer=False)
        for rank in range(prog.world):
            name = f"rank-{rank:05d}.0{lf.LOG_SUFFIX}"
            if rank == HANG_RANK:
                shutil.copy(os.path.join(a, name), os.path.join(directory, name))
                continue
            raw = read_log(os.path.join(b, name))
            recs = [r for r in [raw.header] + raw.records if not (r.get("k") == lf.DONE and r.get("i") == HANG_STOP)]
            with open(os.path.join(directory, name), "wb") as f:
                colls = 0
                for r in recs:
                    f.write(lf.frame(msgpack.packb(r, use_bin_type=True), colls))
                    colls += r["k"] == lf.COLL
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return directory
