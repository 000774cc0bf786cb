"""The settings: every COLLCHECK* variable read in collcheck/base/settings.py and nowhere else, each
one in its docstring's table, parsed the way the recorder and the commands expect."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from collcheck.base.settings import (
    FALSE_VALUES,
    TRUE_VALUES,
    Settings,
    named_here,
    new_run_id,
    safe_run_id,
)

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "collcheck"
SETTINGS = PACKAGE / "base" / "settings.py"


def _is_environ(node) -> bool:
    """`os.environ`, `environ` (a parameter defaulting to it)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def _collcheck(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("COLLCHECK")


def environment_reads(source: str) -> list[str]:
    """The COLLCHECK variables `source` reads from the environment: os.environ.get / os.getenv /
    environ[...] (loaded) / `... in os.environ`, with a constant name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args and _collcheck(node.args[0]):
            f = node.func
            method = isinstance(f, ast.Attribute) and (f.attr == "getenv" or f.attr == "get" and _is_environ(f.value))
            if method or isinstance(f, ast.Name) and f.id == "getenv":
                found.append(node.args[0].value)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value) \
                and _collcheck(node.slice):
            found.append(node.slice.value)
        elif isinstance(node, ast.Compare) and _collcheck(node.left) and any(
                isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and any(map(_is_environ, node.comparators)):
            found.append(node.left.value)
    return found


@pytest.mark.parametrize("line", [
    'os.environ.get("COLLCHECK_X")', 'os.getenv("COLLCHECK_X", "1")', 'getenv("COLLCHECK")',
    'environ.get("COLLCHECK_X", "")', 'int(os.environ["COLLCHECK_X"])', 'ok = "COLLCHECK_X" in os.environ',
    'ok = "COLLCHECK_X" not in environ'])
def test_the_check_sees_each_way_of_reading(line):
    assert len(environment_reads(line)) == 1


@pytest.mark.parametrize("line", [
    'os.environ["COLLCHECK_RUN_ID"] = "x"', 'env = dict(os.environ, COLLCHECK="1")', 'env.get("COLLCHECK_DIR")',
    'os.environ.get("PATH")', 'del os.environ["COLLCHECK_X"]'])
def test_writes_and_other_variables_are_not_reads(line):
    assert environment_reads(line) == []


def test_no_module_but_the_settings_reads_a_collcheck_variable():
    readers = {str(p.relative_to(ROOT)): reads for p in sorted(PACKAGE.rglob("*.py")) if p != SETTINGS
               for reads in [environment_reads(p.read_text())] if reads}
    assert readers == {}
    assert environment_reads(SETTINGS.read_text())  # (the check does find the reads where they are)


def test_the_true_values_are_written_once():
    def literal_sets(path):
        return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.Set, ast.Tuple, ast.List))
                and {"true", "yes"} <= {e.value for e in n.elts if isinstance(e, ast.Constant)}]

    writers = {str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if literal_sets(p)}
    assert writers == {"collcheck/base/settings.py"}
    assert len(literal_sets(SETTINGS)) == 1


def test_base_imports_the_standard_library_only_and_settings_only_os():
    for path in (PACKAGE / "base").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            tops = {n.split(".")[0] for n in names}
            assert tops <= set(sys.stdlib_module_names) | {"__future__"}, (path.name, tops)
    top_level = [n for n in ast.parse(SETTINGS.read_text()).body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert [ast.unparse(n) for n in top_level] == ["from __future__ import annotations", "import os"]


class Recording(dict):
    """An environment that notes every variable asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)


def test_every_variable_read_is_in_the_table_with_its_field_and_default():
    env = Recording()
    Settings.from_env(env)
    table = {m.group(1): m.group(2) for m in re.finditer(r"^\s*(COLLCHECK\w*)\s+(\w+)", Settings.__doc__, re.M)}
    assert set(table) == env.asked and len(table) == 20
    defaults = Settings()
    for variable, field in table.items():
        assert hasattr(defaults, field), variable


def test_an_empty_environment_gives_the_defaults():
    assert vars(Settings.from_env({})) == vars(Settings())
    s = Settings()
    assert (s.enabled, s.directory, s.run_id, s.launch, s.full_stack, s.hang_seconds, s.max_mb, s.live, s.live_action,
            s.live_interval, s.live_hang_seconds, s.fastpath, s.simnccl, s.build_verbose, s.debug, s.workers,
            s.scenarios, s.invalid) == (False, "collcheck-logs", None, "", False, 60.0, 64.0, True, "report", 0.5, 1.5,
                                        "auto", False, False, False, 0, None, {})


def test_values_are_parsed():
    s = Settings.from_env({"COLLCHECK": " Yes ", "COLLCHECK_DIR": "/logs", "COLLCHECK_RUN_ID": "r1",
                           "COLLCHECK_STACK": "FULL", "COLLCHECK_HANG_SECONDS": "0", "COLLCHECK_MAX_MB": "0.5",
                           "COLLCHECK_LIVE": "0", "COLLCHECK_LIVE_ACTION": "abort", "COLLCHECK_LIVE_INTERVAL": "0.001",
                           "COLLCHECK_LIVE_HANG_SECONDS": "3", "COLLCHECK_FASTPATH": "off", "COLLCHECK_SIMNCCL": "on",
                           "COLLCHECK_BUILD_VERBOSE": "1", "COLLCHECK_DEBUG": "0", "COLLCHECK_WORKERS": "3",
                           "COLLCHECK_SCENARIOS": "/sc"})
    assert (s.enabled, s.directory, s.run_id, s.launch, s.full_stack, s.hang_seconds, s.max_mb, s.live, s.live_action,
            s.live_interval, s.live_hang_seconds, s.fastpath, s.simnccl, s.build_verbose, s.debug, s.workers,
            s.scenarios, s.invalid) == (True, "/logs", "r1", "r1", True, 0.0, 0.5, False, "abort", 0.05, 3.0,
                                        "off", True, True, True, 3, "/sc", {})
    assert s.check() is s


def test_completion_polling_settings():
    """auto (the backends whose futures complete at enqueue) or poll (every backend); the interval
    in ms, kept within 0.5-1000 (an infinite one would never poll, nan none at all)."""
    assert (Settings().completion, Settings().poll_ms) == ("auto", 5.0)
    s = Settings.from_env({"COLLCHECK_COMPLETION": " Poll ", "COLLCHECK_POLL_MS": "2"})
    assert (s.completion, s.poll_ms, s.invalid) == ("poll", 2.0, {})
    for text, ms in (("0", 0.5), ("inf", 1000.0), ("nan", 0.5), ("1e9", 1000.0)):
        assert Settings.from_env({"COLLCHECK_POLL_MS": text}).poll_ms == ms, text
    bad = Settings.from_env({"COLLCHECK_COMPLETION": "future", "COLLCHECK_POLL_MS": "soon"})
    assert set(bad.invalid) == {"COLLCHECK_COMPLETION", "COLLCHECK_POLL_MS"}
    with pytest.raises(ValueError, match="COLLCHECK_COMPLETION must be 'auto' or 'poll'"):
        bad.check()


@pytest.mark.parametrize("value", sorted(TRUE_VALUES | FALSE_VALUES) + ["", "2", "maybe"])
def test_flags_and_the_fast_path_share_the_true_and_false_words(value):
    s = Settings.from_env({"COLLCHECK": value, "COLLCHECK_SIMNCCL": value, "COLLCHECK_FASTPATH": value.upper()})
    assert s.enabled == s.simnccl == (value in TRUE_VALUES)
    assert s.fastpath == ("on" if value in TRUE_VALUES else "off" if value in FALSE_VALUES else "auto")
    assert Settings.from_env({"COLLCHECK_BUILD_VERBOSE": value}).build_verbose == (value == "1")  # exactly "1"


def test_invalid_values_keep_the_defaults_until_checked():
    env = {"COLLCHECK_STACK": "deep", "COLLCHECK_LIVE_ACTION": "panic", "COLLCHECK_HANG_SECONDS": "soon",
           "COLLCHECK_WORKERS": "many"}
    s = Settings.from_env(env)  # reading never fails: the startup hook and the error path read them
    assert (s.full_stack, s.live_action, s.hang_seconds, s.workers) == (False, "report", 60.0, 0)
    with pytest.raises(ValueError, match=r"^COLLCHECK_STACK must be 'site' or 'full', not 'deep'$"):
        s.check()
    del env["COLLCHECK_STACK"]
    with pytest.raises(ValueError, match=r"^COLLCHECK_LIVE_ACTION must be 'report' or 'abort', not 'panic'$"):
        Settings.from_env(env).check()
    del env["COLLCHECK_LIVE_ACTION"]
    with pytest.raises(ValueError, match=r"^could not convert string to float: 'soon'$"):
        Settings.from_env(env).check()
    del env["COLLCHECK_HANG_SECONDS"]
    assert Settings.from_env(env).check()  # recording does not look at COLLCHECK_WORKERS ...
    with pytest.raises(ValueError, match=r"invalid literal for int\(\) with base 10: 'many'"):
        Settings.from_env(env).check("COLLCHECK_WORKERS")  # ... the command that reads logs does


def test_the_run_id():
    assert Settings.from_env({"COLLCHECK_RUN_ID": ""}).run_id is None
    s = Settings.from_env({"COLLCHECK_RUN_ID": "exported"})
    s.run_id = "set-in-code"  # collcheck.enable(run_id=...): the header's "launch" keeps the exported one
    assert (s.resolved_run_id({}), s.launch) == ("set-in-code", "exported")
    assert s.resolved_run_id({"TORCHELASTIC_RUN_ID": "rdzv"}) == "rdzv"
    assert s.resolved_run_id({"TORCHELASTIC_RUN_ID": "none"}) == "set-in-code"
    assert Settings().resolved_run_id({}).startswith("ppid")


def test_who_named_the_run():
    """A name this process made (new_run_id: its host and pid last) or none at all: every rank
    launched apart named the run its own way (capture/session.py agrees on one through the store).
    A name from torchrun, a parent or the user: every rank has it already."""
    mine = new_run_id()
    assert named_here(mine) and not named_here("20261129-120000-otherhost-1") and not named_here(None)
    assert Settings(run_id=mine).named_by_each_rank({}) and Settings().named_by_each_rank({})
    assert Settings(run_id=mine).named_by_each_rank({"TORCHELASTIC_RUN_ID": "none"})
    assert not Settings(run_id=mine).named_by_each_rank({"TORCHELASTIC_RUN_ID": "rdzv"})
    assert not Settings(run_id="from-the-parent").named_by_each_rank({})


@pytest.mark.parametrize("text,safe", [
    ("20261129-180231-vm-1796", True), ("1800dab9-c717-4ef8-b1fe-0315f6669bcd", True), ("run_1.retry", True),
    ("", False), (".hidden", False), ("..", False), ("../up", False), ("a/b", False), ("a\\b", False),
    ("red\x1b[31m", False), ("x" * 201, False), ("tab\there", False)])
def test_a_run_name_read_from_the_store_is_a_plain_folder_name(text, safe):
    assert safe_run_id(text) is safe


def test_the_log_reader_setting():
    """auto (the compiled loop where it builds) or python; another value: auto, named as invalid."""
    assert Settings.from_env({}).reader == "auto"
    assert Settings.from_env({"COLLCHECK_READER": " Python "}).reader == "python"
    wrong = Settings.from_env({"COLLCHECK_READER": "c"})
    assert wrong.reader == "auto" and "COLLCHECK_READER" in wrong.invalid
