"""The recorder's two engines (capture/engine_python.py, engine_native.py): one interface, chosen
once per log (Recorder.use_engine), and no per-call code asks which one runs: the functions the
kernels and wrappers run per collective read no engine type, no `compiled` flag, no module."""

from __future__ import annotations

import ast
import inspect
import textwrap
import types

from collcheck.base.settings import Settings
from collcheck.capture import completions, issue, recorder
from collcheck.capture.engine_native import NativeEngine
from collcheck.capture.engine_python import PythonEngine
from collcheck.capture.live import tables

# what runs per collective on either path (the Python kernels, the compiled path's hooks, the API wrappers)
PER_CALL = [issue.Issuer.on_issue, issue.Issuer._issue, issue.Issuer.emit, issue.Issuer._api_fields,
            issue.Issuer._label, issue.Issuer.on_return, completions.Completions.track,
            completions.Completions.forget, completions.Completions.watch, completions.Completions.drain,
            completions.Completions.drain_queued, completions.Completions.has_queued, completions.Completions.poll,
            tables.LiveTables.mix, recorder.Recorder.set_api_call, recorder.Recorder.count_backward_pass]
ENGINE_WORDS = {"native", "_native", "compiled", "NativeEngine", "PythonEngine", "module", "fastpath"}


class _Module:
    """What NativeEngine binds of the compiled module: each name a distinct callable."""

    def __getattr__(self, name):
        def call(*args):
            return name
        call.__name__ = name
        return call


def _public(obj) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n))}


def test_both_engines_have_one_interface():
    python, native = _public(PythonEngine()), _public(NativeEngine(_Module()))
    assert python == native
    assert {"next_eid", "next_seq", "label_state", "mix", "track", "forget", "take_done", "set_api",
            "attach", "after_fork_in_child"} <= python
    assert PythonEngine.compiled is False and NativeEngine.compiled is True


def test_the_native_engine_calls_the_module_directly():
    fake = _Module()
    module = types.SimpleNamespace(**{name: getattr(fake, name) for name in _public(PythonEngine()) | {"peek_eid"}})
    engine = NativeEngine(module)
    assert engine.next_eid() == "next_eid" and engine.mix(0, 0, 1) == "mix"
    assert engine.next_eid is module.next_eid  # the module's own function: no Python frame between


def _names(fn) -> set[str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    body = tree.body[0]
    body.body = [s for s in body.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return {n.id for n in ast.walk(body) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(body) if isinstance(n, ast.Attribute)}


def test_no_per_call_function_asks_which_engine_runs():
    found = {fn.__qualname__: sorted(_names(fn) & ENGINE_WORDS) for fn in PER_CALL}
    assert {k: v for k, v in found.items() if v} == {}
    probe = "def emit(self):\n    if self._native is not None:\n        pass\n"  # (the check can fail)
    assert _names_of_source(probe) & ENGINE_WORDS == {"_native"}


def _names_of_source(source: str) -> set[str]:
    tree = ast.parse(source)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}


def test_a_recorder_records_through_one_engine_its_parts_share():
    rec = recorder.Recorder(Settings())
    engine = rec.engine
    assert type(engine) is PythonEngine and not rec.compiled
    assert rec.completions._engine is engine and rec.live._engine is engine
    other = PythonEngine()
    rec.use_engine(other)  # (fastpath.attach: once per log)
    assert rec.engine is other and rec.completions._engine is other and rec.live._engine is other
