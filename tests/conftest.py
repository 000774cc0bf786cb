"""The two layers of the suite (tests/README.md): tests/unit, in-process on logs built in memory;
tests/integration, real jobs and the real CLI on their logs.

This file runs the session's shared recordings (tests/support/corpus.py): as soon as collection
ends, every recording a selected test names with `@pytest.mark.recordings(...)` starts in the
background, in the order the tests first need them, while the unit tests run. Tests marked
`solo` start a job whose timing is what they check: they run last, once no recording runs.
"""

from __future__ import annotations

import os
import tempfile

import pytest

from support.corpus import Corpus, FastpathUnavailable, cleanup

# In-process commands never start a background build of the compiled path (support/jobs.py says
# which path each job records on).
os.environ.setdefault("COLLCHECK_FASTPATH", "0")
WORKERS = int(os.environ.get("COLLCHECK_TEST_JOBS", "4"))  # recordings at once, at most (support/admission.py)

_corpus: Corpus | None = None


def pytest_configure(config):
    config.addinivalue_line("markers", "recordings(*names): shared recordings the test reads (tests/support/corpus.py)")
    config.addinivalue_line("markers", "solo: starts a job whose timing it checks; runs last, with no recording running")
    config.addinivalue_line("markers", "property: a hypothesis test (marked by conftest.py); -m 'slow or property' "
                                       "runs them with 3 times the cases")
    if "property" in (config.option.markexpr or ""):
        os.environ.setdefault("COLLCHECK_TEST_EXAMPLES", "3")


def _needed(items) -> list[str]:
    names: list[str] = []
    for item in items:
        for mark in item.iter_markers("recordings"):
            names += [n for n in mark.args if n not in names]
    return names


def pytest_collection_modifyitems(session, config, items):
    """Unit tests first (recordings run meanwhile), then the integration tests that wait for no
    shared recording (their own jobs and commands run while the recordings are made), then the
    others, solo ones last."""
    def layer(item) -> int:
        if item.get_closest_marker("solo"):
            return 3
        if "/tests/unit/" in str(item.path):
            return 0
        waits = any(item.iter_markers("recordings")) or {"corpus", "fastpath_env"} & set(item.fixturenames)
        return 2 if waits else 1

    items.sort(key=layer)  # stable: file order within each layer
    for item in items:
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.property)


def pytest_collection_finish(session):
    names = _needed(session.items)
    if names and not session.config.option.collectonly:
        _get_corpus(session.config).prefetch(names)


def _get_corpus(config) -> Corpus:
    global _corpus
    if _corpus is None:
        root = tempfile.mkdtemp(prefix="collcheck-corpus-")
        _corpus = Corpus(root, WORKERS)
        config.add_cleanup(lambda: (_corpus.close(), cleanup(root)))
    return _corpus


def pytest_terminal_summary(terminalreporter):
    """The shared recordings' times beside --durations: a recording that grows shows here."""
    if _corpus is None or not _corpus.futures:
        return
    lines = _corpus.summary()
    terminalreporter.write_sep("=", "shared recordings (tests/support/corpus.py), longest first")
    body, total = lines[:-1], lines[-1]
    shown = len(body) if os.environ.get("COLLCHECK_TEST_PROFILE") else 15
    for line in body[:shown] + ([f"... {len(body) - shown} more"] if len(body) > shown else []) + [total]:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def corpus(request):
    """`corpus(name)` -> the Launch of that shared recording (made once per session)."""
    c = _get_corpus(request.config)

    def get(name: str):
        try:
            return c(name)
        except FastpathUnavailable as exc:
            pytest.skip(str(exc))

    get.corpus = c
    return get


@pytest.fixture(scope="session")
def fastpath_env(request) -> dict:
    """Environment for jobs on the compiled fast path, built once (skipped with the reason when no
    C++ compiler or ninja is found)."""
    try:
        return _get_corpus(request.config).fastpath()
    except FastpathUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(autouse=True)
def _ready(request):
    """Before the test (its time limit covers the test itself): the recordings it names are made,
    and for a solo test no recording runs any more."""
    names = _needed([request.node])
    if names:
        c = _get_corpus(request.config)
        for name in names:
            try:
                c(name)
            except FastpathUnavailable:
                pass  # the test's own corpus(name) call skips it, with the reason
            except Exception:  # noqa: BLE001 - reported by the test's own corpus(name) call
                pass
    if request.node.get_closest_marker("solo") and _corpus is not None:
        _corpus.drain()
    yield
