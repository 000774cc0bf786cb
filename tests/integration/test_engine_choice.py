"""The recorder's engine (capture/engine_python.py, engine_native.py) is chosen once, when its log
opens: the compiled kernels' NativeEngine when the fast path is built, the PythonEngine otherwise or
with COLLCHECK_FASTPATH=0; every call records through it (real world-size-1 gloo jobs)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support.jobs import base_env, free_port, program


def _run(tmp_path, extra: dict) -> str:
    env = base_env(tmp_path, record=False, extra=extra)
    proc = subprocess.run([sys.executable, program("engine_world1.py"), str(tmp_path / "logs"), str(free_port())],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_the_python_engine_without_the_compiled_path(tmp_path):
    out = _run(tmp_path, {"COLLCHECK_FASTPATH": "0"})
    assert "before the log PythonEngine" in out
    assert "engine PythonEngine compiled False same True" in out
    assert "records 21 numbered True" in out


@pytest.mark.timeout(150)
def test_the_native_engine_when_the_compiled_path_is_built(built_fastpath, tmp_path):
    out = _run(tmp_path, dict(built_fastpath))
    assert "before the log PythonEngine" in out  # (nothing is recorded before the log opens)
    assert "engine NativeEngine compiled True same True" in out
    assert "records 21 numbered True" in out


@pytest.fixture
def built_fastpath(fastpath_env, monkeypatch):
    """The compiled path built (conftest.fastpath_env) and found by the job."""
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    return fastpath_env
