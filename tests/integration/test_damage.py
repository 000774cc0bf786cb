"""Damaged logs (format 2): real recorded runs, one file damaged at any offset (a flipped bit,
inserted or deleted bytes, a duplicated chunk, zeroed bytes).

Every frame the damage did not touch is read back, record for record; `diff` (every format),
`show`, the TUI's view model and the replay plan never end in an internal error; a damaged run
never yields a finding the undamaged one does not have (compared by group and slot: the kind
of a divergence can read differently once a rank's sequence is cut short, its place cannot).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from collcheck.analysis.diff import analyse
from collcheck.cli import main
from collcheck.model import load_run
from collcheck.logfile.reader import LogError, parse_log
from collcheck.replay.plan import build_plan
from support.logbytes import frames

# a correct DDP + join() run, a hang, P2P stages, a rank that left: recordings other tests read too
SCENARIOS = ("join_uneven_inputs", "seed004_case4", "p2p_pipeline", "missing_barrier")
EXAMPLES = int(os.environ.get("COLLCHECK_FUZZ_EXAMPLES", "40"))
pytestmark = pytest.mark.recordings(*(f"scenario:{n}" for n in SCENARIOS))


@pytest.fixture(scope="module")
def recorded(corpus):
    runs = {}
    for name in SCENARIOS:
        run_dir = corpus(f"scenario:{name}").run_dir
        files = sorted(os.path.join(run_dir, f) for f in os.listdir(run_dir) if f.endswith(".msgpack"))
        runs[name] = (run_dir, files, finding_keys(analyse(load_run(run_dir))))
    return runs


def finding_keys(report) -> set:
    """Where each finding is: (group, slot) of a divergence, (group, src, dst, message) of a P2P
    one, 'hang' for a hang or a deadlock."""
    keys = set()
    for f in report.findings:
        if f.kind in ("hang", "deadlock"):
            keys.add(("hang",))
        elif f.details.get("p2p"):
            keys.add(("p2p", f.group, f.details["src"], f.details["dst"], f.position))
        else:
            keys.add((f.kind if f.kind in ("group_mismatch", "non_member_call") else "slot", f.group, f.position))
    return keys


def damage(data: bytes, kind: str, at: int, arg) -> tuple[bytes, int, int]:
    """The damaged bytes, and the edited range [start, end) in the original's offsets (in-place
    edits, deletions, the duplicated chunk) or the insertion point (start == end)."""
    at = min(at, len(data) - 1)
    if kind == "flip":
        return data[:at] + bytes((data[at] ^ (1 << arg),)) + data[at + 1:], at, at + 1
    if kind == "zero":
        return data[:at] + b"\0" * len(data[at:at + 16]) + data[at + 16:], at, min(at + 16, len(data))
    if kind == "insert":
        return data[:at] + arg + data[at:], at, at
    if kind == "delete":
        return data[:at] + data[at + arg:], at, min(at + arg, len(data))
    chunk = data[at:at + 40]  # duplicated: the copy follows the original
    end = at + len(chunk)
    return data[:end] + chunk + data[end:], at, end


def intact_records(data: bytes, damaged: bytes, shift: int) -> list | None:
    """The records of the frames the damage left whole: found at their place or, after it, moved
    by `shift` bytes (None: the header's frame was hit)."""
    out = []
    for i, (a, b, recs) in enumerate(frames(data)):
        whole = damaged[a:b] == data[a:b] or (0 <= a + shift and damaged[a + shift:b + shift] == data[a:b])
        if not whole and i == 0:
            return None
        if whole:
            out += recs
    return out[1:]


def run_cli(*argv) -> int:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    assert rc != 3 and "internal error" not in err.getvalue(), (argv, err.getvalue())
    return rc


DAMAGE = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 7)),
    st.tuples(st.just("zero"), st.none()),
    st.tuples(st.just("insert"), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.integers(1, 8)),
    st.tuples(st.just("duplicate"), st.none()),
)


HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
CASES = dict(scenario=st.sampled_from(SCENARIOS), which=st.integers(0, 3), where=st.floats(0, 1), how=DAMAGE)


@pytest.mark.timeout(900)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=HEALTH)
@given(**CASES)
def test_damaged_log(recorded, scenario, which, where, how):
    check_damaged(recorded, scenario, which, where, how)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@settings(max_examples=1000, deadline=None, suppress_health_check=HEALTH)
@given(**CASES)
def test_damaged_log_many(recorded, scenario, which, where, how):
    check_damaged(recorded, scenario, which, where, how)


@pytest.mark.slow  # (by default test_damaged_log reads damaged logs in every diff format, show and the TUI's grid)
def test_damaged_run_in_the_tui_and_replay(recorded, tmp_path):
    """The real TUI (headless) and a real replay on a run with a damaged log: no internal error,
    the damage said as a warning."""
    import asyncio

    from collcheck.tui.app import CollcheckApp

    run_dir, files, _ = recorded["seed004_case4"]
    copy = str(tmp_path / "run")
    shutil.copytree(run_dir, copy)
    target = os.path.join(copy, os.path.basename(files[1]))
    with open(target, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0x10
    with open(target, "wb") as f:
        f.write(bytes(data))

    async def main():
        app = CollcheckApp(copy)
        async with app.run_test(size=(160, 45)) as pilot:
            for _ in range(600):
                if app.report is not None or app.error is not None:
                    break
                await pilot.pause(0.05)
            assert app.error is None and app.report is not None
            assert any("damaged" in w for w in app.report.run.warnings)
            await pilot.press("n")
            await pilot.pause()

    asyncio.run(main())
    assert run_cli("replay", copy, "--timeout", "3") in (0, 1, 2)


def check_damaged(recorded, scenario, which, where, how):
    run_dir, files, clean_keys = recorded[scenario]
    path = files[which % len(files)]
    with open(path, "rb") as f:
        data = f.read()
    kind, arg = how
    damaged, start, end = damage(data, kind, int(where * len(data)), arg)
    expected = intact_records(data, damaged, len(damaged) - len(data))
    tmp = tempfile.mkdtemp(prefix="damaged-")
    try:
        copy = os.path.join(tmp, "run")
        shutil.copytree(run_dir, copy)
        target = os.path.join(copy, os.path.basename(path))
        with open(target, "wb") as f:
            f.write(damaged)
        if expected is None:  # the header's frame: a log cannot do without it (or finds it again)
            assert run_cli("diff", copy) in (0, 1, 2)
            try:
                parse_log(damaged, target)
            except LogError:
                return
        else:
            raw = parse_log(damaged, target)
            assert raw.records == expected
        for fmt in ("text", "json", "junit", "github"):
            assert run_cli("diff", copy, "--format", fmt, "-o", os.path.join(tmp, f"report.{fmt}")) in (0, 1)
        assert run_cli("show", target) == 0
        run = load_run(copy)
        report = analyse(run)
        assert finding_keys(report) <= clean_keys, (kind, start, report.findings)
        from collcheck.tui.grid import Grid

        grids = [Grid(report, None)] + [Grid(report, g) for g in run.group_names()]
        for log in run.ranks.values():  # one pass over the file gives what reading event by event does
            assert log.events() == [log.event(i) for i in range(len(log))]
        assert run_cli("stats", copy, "--format", "json") == 0
        build_plan(run, sorted(run.ranks))
        assert all(g.seqs for g in grids)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
