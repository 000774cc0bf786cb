"""The recorder's parts (capture/recorder.py, issue.py, process_records.py, completions.py,
live/tables.py, the engines, native/): held as objects, not inherited; the state they share with the
compiled kernels is kept by the recorder's engine, in Python or in the kernels' module, chosen once
(use_engine); no other module of capture/ sets the recorder's attributes; the compiled path is one
C++ file whose stub lists what it defines."""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

import pytest

from collcheck.base.settings import Settings
from collcheck.capture import recorder as recorder_module
from collcheck.capture.completions import Completions
from collcheck.capture.engine_native import NativeEngine
from collcheck.capture.engine_python import PythonEngine
from collcheck.capture.issue import Issuer
from collcheck.capture.live import tables as live_hash
from collcheck.capture.native import fastpath
from collcheck.capture.native.hooks import NativeHooks
from collcheck.capture.process_records import ProcessRecords
from collcheck.capture.recorder import Recorder, ThreadState

CAPTURE = Path(recorder_module.__file__).parent
NATIVE = CAPTURE / "native"
PARTS = {"recorder.py": "Recorder", "completions.py": "Completions", "live/tables.py": "LiveTables",
         "native/hooks.py": "NativeHooks", "issue.py": "Issuer", "process_records.py": "ProcessRecords",
         "engine_python.py": "PythonEngine", "engine_native.py": "NativeEngine"}


def _class(path: Path, name: str) -> ast.ClassDef:
    found = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef) and n.name == name]
    assert len(found) == 1, (path, name)
    return found[0]


def test_the_recorder_and_its_parts_have_no_base_classes():
    for path, name in PARTS.items():
        assert _class(CAPTURE / path, name).bases == [], f"{path}: class {name} has base classes"
    rec = Recorder(Settings())
    assert (type(rec.completions), type(rec.live), type(rec.issuer), type(rec.records), type(rec.engine)) == (
        Completions, live_hash.LiveTables, Issuer, ProcessRecords, PythonEngine)


def _recorder_assignments(label: str, source: str) -> list[str]:
    """Attribute assignments in `source` on a name that holds a recorder, or on `...recorder()`."""
    holders = {"rec", "recorder", "_recorder", "_attached"}
    out = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for sub in ast.walk(target):
                if not isinstance(sub, ast.Attribute):
                    continue
                root = sub
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                called = ast.unparse(root.func) if isinstance(root, ast.Call) else ""
                if called.endswith("recorder") or isinstance(root, ast.Name) and root.id in holders:
                    out.append(f"{label}:{node.lineno}: {ast.unparse(target)}")
                break
    return out


def test_no_other_module_sets_the_recorders_attributes():
    """They call its methods (replay's runtime too: it starts a backward pass); `active`, the
    recorder's public switch, is a property."""
    package = CAPTURE.parent
    found = [a for p in sorted(package.rglob("*.py")) if p != CAPTURE / "recorder.py"
             for a in _recorder_assignments(str(p.relative_to(package)), p.read_text())]
    assert [a for a in found if not a.endswith(": rec.active")] == []
    probe = "def f(rec):\n    rec.tls.api = None\n    session.recorder().x += 1\n    rec.active = False\n"
    assert _recorder_assignments("probe", probe) == ["probe:2: rec.tls.api", "probe:3: session.recorder().x",
                                                     "probe:4: rec.active"]


def _cpp_definitions() -> tuple[set[str], set[str]]:
    """(module-level names, WriterLock's members) that fastpath.cpp defines for Python."""
    text = (NATIVE / "fastpath.cpp").read_text()
    module = set(re.findall(r'\bm\.def\("(\w+)"', text)) | set(re.findall(r'py::class_<\w+>\(m, "(\w+)"\)', text))
    start = text.index('py::class_<WriterLock>')
    block = text[start:text.index("m.def(", start)]  # its chain of .def calls
    members = set(re.findall(r'\.def(?:_readwrite|_readonly|_property)?\("(\w+)"', block))
    return module, members


def _stub_definitions() -> tuple[set[str], set[str]]:
    tree = ast.parse((NATIVE / "extension.pyi").read_text())
    module = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    lock = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "WriterLock")
    members = {n.name for n in lock.body if isinstance(n, ast.FunctionDef)}
    members |= {n.target.id for n in lock.body if isinstance(n, ast.AnnAssign)}
    return module, members - {"__init__"}


def test_the_compiled_path_is_one_file_and_its_stub_lists_what_it_defines():
    assert fastpath.SOURCES == (str(NATIVE / "fastpath.cpp"),)
    assert sorted(p.name for p in NATIVE.iterdir() if p.suffix in (".h", ".hpp", ".cpp", ".cc")) == ["fastpath.cpp"]
    assert re.findall(r'#include\s+"', (NATIVE / "fastpath.cpp").read_text()) == []
    module, members = _cpp_definitions()
    assert {"install", "attach", "cache", "WriterLock", "take_done"} <= module and {"acquire", "fd"} <= members
    assert _stub_definitions() == (module, members)


class _Lock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Writer:
    """What Completions asks of a LogWriter, recorded."""

    def __init__(self):
        self.lock = _Lock()
        self.calls: list[tuple] = []

    def done(self, eid, returned, completed):
        self.calls.append(("done", eid, returned, completed))

    def queue(self, rec):
        self.calls.append(("queue", rec))

    def write(self, rec=None, eid=None):
        self.calls.append(("write", rec))


class _Native:
    """The compiled module's calls that the recorder's parts make, recorded (a fake)."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.table: dict = {}

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, *args))
            return {"inflight": [(7, (1, 2, "send"))], "take_done": [(3, 10, 12, None)]}.get(name)
        return call

    def mix(self, key, j, sig):
        live_hash.mix(self.table, key, j, sig)

    def live(self):
        return [(k, h, ring) for k, (h, ring) in self.table.items()]


class _Future:
    def __init__(self, error=None):
        self.error = error

    def value(self):
        if self.error is not None:
            raise self.error


def test_completions_in_python_then_in_the_module():
    now = iter(range(100, 200))
    c, w = Completions(lambda: next(now)), _Writer()
    c.track(1, "allreduce_")
    c.track(2, "broadcast_")
    assert [(e, v[2]) for e, v in c.items()] == [(1, "allreduce_"), (2, "broadcast_")]
    assert c.items()[0][1][1] == threading.get_ident()
    c.add([(1, 5, 6, _Future()), (2, 5, None, _Future(RuntimeError("peer died")))])
    c.drain_queued(w)
    assert w.calls == [("done", 1, 5, 6), ("queue", {"k": "D", "i": 2, "r": 5, "e": "RuntimeError: peer died"})]
    assert c.items() == []
    c.finish(w, 4, 7)
    c.finish(None, 5, 7)  # (no log: nothing)
    assert w.calls[-1] == ("done", 4, 7, 100)

    native = _Native()
    c.use_engine(NativeEngine(native))
    c.track(8, "send")
    c.forget(9)
    assert [n[0] for n in native.calls] == ["track", "forget"] and native.calls[0][1] == 8
    assert c.items() == [(7, (1, 2, "send"))]
    c.drain_queued(w)  # nothing queued in Python: the module's completions wait for the next drain
    assert [n[0] for n in native.calls] == ["track", "forget", "inflight"]
    c.drain(w)
    assert native.calls[-2:] == [("take_done",), ("forget", 3)] and w.calls[-1] == ("done", 3, 10, 12)


def test_live_tables_publish_the_same_state_from_python_or_the_module():
    signatures = [(0, j, 1000 + j) for j in range(70)] + [((1 << 34) | (1 << 32) | 1, 0, 5)]
    states = []
    for native in (None, _Native()):
        t = live_hash.LiveTables(PythonEngine() if native is None else native)
        t.set_members(0, [0, 1])
        t.set_members(1, [2, 3])
        for seq, j, sig in signatures:
            t.mix(seq, j, sig, seq >> 34, 9 if j == 69 else None)
        seqs = {0: 69, (1 << 34) | (1 << 32) | 1: 0}
        states.append(t.state({"world": 0, "pair": 1}, seqs))
    assert states[0] == states[1]
    world = states[0]["g"]["world"]
    assert world[0] == 70 and world[3:] == [2, {69: 9}] and len(world[2]) == 4 * live_hash.RING
    assert list(states[0]["c"]) == ["pair>3"]


def test_use_engine_hands_the_module_the_hooks_and_switches_every_part(monkeypatch):
    rec = Recorder(Settings())
    writer = _Writer()
    monkeypatch.setattr(rec, "writer", writer)
    native = _Native()
    rec.use_engine(NativeEngine(native))
    hooks = rec.engine.hooks
    assert native.calls[0] == ("set_polling", -1)  # no group whose futures complete at enqueue yet: none kept
    assert native.calls[1] == ("attach", hooks.issue, hooks.returned, hooks.label_sid, rec.fail, rec.t0, writer)
    assert [n[0] for n in native.calls[2:]] == ["set_epoch", "set_enabled"] and rec.compiled
    assert writer.colls_written is not None
    rec.count_backward_pass()
    assert native.calls[-1] == ("set_epoch", 1)
    rec.set_api_call(None)  # "an API call is active" is kept per thread in C++
    assert native.calls[-1] == ("set_api", False)
    rec.completions.track(3, "allreduce_")
    assert native.calls[-1][:2] == ("track", 3)
    rec.use_engine(PythonEngine())  # a later recorder took the kernels: Python's own state again
    rec.completions.track(4, "allreduce_")
    assert not rec.compiled and native.calls[-1][:2] == ("track", 3) and [e for e, _ in rec.inflight_items()] == [4]


def test_an_error_in_a_hook_goes_to_the_recorders_fail():
    failures = []

    class BrokenWriter(_Writer):
        def write(self, rec=None, eid=None):
            raise OSError("disk full")

    class Rec:
        active = True
        tls = ThreadState()
        writer = BrokenWriter()

        def fail(self, exc):
            failures.append(exc)

    hooks = NativeHooks(Rec(), Completions(lambda: 0), None)
    hooks.returned(1, 2, RuntimeError("peer died"))  # a recorded op raised: its D record is written at once
    assert [type(e) for e in failures] == [OSError]
    assert hooks.issue(0, (), None, None, None) is None  # (a template's details that do not unpack)
    assert [type(e) for e in failures] == [OSError, ValueError]


def test_a_failing_watcher_stops_recording_with_one_warning_at_the_line_that_set_active():
    rec = Recorder(Settings())
    rec.watch_active(lambda on: 1 / 0)
    with pytest.warns(RuntimeWarning, match="recording disabled after an internal error") as caught:
        rec.active = True
    assert [w.filename for w in caught] == [__file__] and rec.failed and rec.active is False
    rec.active = True  # (the watcher is dropped: no second warning)
    assert len(caught) == 1


def test_a_log_the_disk_refuses_stops_recording_with_one_warning_and_the_job_goes_on(tmp_path, monkeypatch):
    """The log's file turns into /dev/full (the kernel's ENOSPC on every write): the writer stops,
    the recorder says so once and records nothing more; nothing is raised to the job."""
    import os

    from collcheck.logfile import format as lf

    monkeypatch.setattr(fastpath, "writer_lock", lambda: None)  # (the Python path's writer)
    rec = Recorder(Settings(directory=str(tmp_path), run_id="r"))
    rec.open(0, 1, "cpu:gloo")
    w = rec.writer
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, w.counters.fd)
    os.close(full)
    with pytest.warns(RuntimeWarning, match=r"recording stopped: could not write .*rank-00000\.0\.msgpack: No space "
                                            r"left on device \(ENOSPC\)") as caught:
        rec.record({"k": lf.STEP, "ts": 1})
        rec.record({"k": lf.STEP, "ts": 2})
        rec.fail(RuntimeError("later"))
    assert len(caught) == 1 and rec.failed and rec.active is False
    assert w.stopped == "No space left on device (ENOSPC)"
