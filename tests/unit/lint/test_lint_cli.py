"""`collcheck lint` as users run it: exit codes, the four formats, bad input, hostile sources."""

from __future__ import annotations

import json
import textwrap

import pytest
from support.ci import runner_commands
from support.cli import run_cli

BUGGY = textwrap.dedent('''\
    import torch
    import torch.distributed as dist

    def main():
        rank = dist.get_rank()
        t = torch.ones(1)
        if rank == 0:
            torch.save(t, "ckpt.pt")
            dist.barrier()
        dist.all_reduce(t)
    ''')


@pytest.fixture
def buggy(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    return path


def test_text_names_the_call_the_branch_the_source_and_the_fix(buggy):
    res = run_cli("lint", buggy)
    assert res.code == 1, res.err
    first = res.out.splitlines()[0]
    assert first.startswith(f"{buggy}:9:9: error rank-branch `dist.barrier()` issues dist.barrier() inside `if rank == 0:`"), first
    assert "(line 7)" in first and "dist.get_rank(), line 5" in first, first
    assert "fix: call `dist.barrier()` on every rank" in res.out
    assert res.out.rstrip().splitlines()[-1].startswith("collcheck lint: 1 finding in 1 file: 1 error, 0 warnings "
                                                        "(1 files, 10 lines")


def test_json_and_exit_zero(buggy, tmp_path):
    out = tmp_path / "lint.json"
    res = run_cli("lint", buggy, "--format", "json", "-o", out, "--exit-zero")
    assert res.code == 0 and res.out == ""
    report = json.loads(out.read_text())
    [f] = report["findings"]
    assert (f["line"], f["branch"]["line"], f["kind"], f["issues"]) == (9, 7, "rank", "dist.barrier()")
    assert f["chain"][0] == {"file": str(buggy), "line": 9, "source": "dist.barrier()"}
    assert report["version"] == 1 and report["files"] == 1


def test_github_annotation_and_sarif_locations(buggy):
    gh = run_cli("lint", buggy, "--format", "github")
    assert gh.code == 1
    assert gh.out.startswith(f"::error file={str(buggy).replace(':', '%3A')},line=9,col=9,title=collcheck rank-branch (rank)::")
    sarif = json.loads(run_cli("lint", buggy, "--format", "sarif").out)
    assert sarif["version"] == "2.1.0"
    [result] = sarif["runs"][0]["results"]
    assert result["ruleId"] == "rank-branch"
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 9, "startColumn": 9}
    assert result["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 7
    assert sarif["runs"][0]["tool"]["driver"]["rules"][0]["id"] == "rank-branch"


POSSIBLE = """import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import get_model_state_dict


def save(model, loss):
    if torch.isnan(loss).any():  # this rank's data: maybe made alike earlier
        return
    if dist.get_rank() == 0:
        sd = get_model_state_dict(model)  # gathers only under FSDP or tensor parallelism
        torch.save(sd, "model.pt")
    dist.all_reduce(loss)
"""


def test_possible_findings_are_warnings_that_fail_only_with_strict(tmp_path):
    """A call that issues collectives only in some configurations, or a condition on this rank's data:
    warnings, in every format; exit 0 unless --strict."""
    path = tmp_path / "save.py"
    path.write_text(POSSIBLE)
    res = run_cli("lint", path)
    assert res.code == 0, res.out + res.err
    lines = [ln for ln in res.out.splitlines() if ln.startswith(str(path))]
    assert [ln.split(": ", 2)[1].split()[0] for ln in lines] == ["warning", "warning"], res.out
    assert "a warning: whether it issues collectives depends on the runtime" in res.out
    assert "a warning: whether this rank's data differs" in res.out
    assert res.out.rstrip().splitlines()[-1].startswith("collcheck lint: 2 findings in 1 file: 0 errors, 2 warnings")
    assert run_cli("lint", path, "--strict").code == 1
    assert run_cli("lint", path, "--strict", "--exit-zero").code == 0
    report = json.loads(run_cli("lint", path, "--format", "json").out)
    assert (report["errors"], report["warnings"]) == (0, 2)
    assert {f["severity"] for f in report["findings"]} == {"warning"}
    sarif = json.loads(run_cli("lint", path, "--format", "sarif").out)
    assert {r["level"] for r in sarif["runs"][0]["results"]} == {"warning"}
    gh = run_cli("lint", path, "--format", "github")
    assert gh.code == 0 and gh.out.count("::warning ") == 2 and "::error " not in gh.out, gh.out
    # the same calls under a condition on the rank, certainly issuing collectives: an error
    path.write_text(POSSIBLE.replace("get_model_state_dict(model)", "dist.all_reduce(loss)"))
    assert run_cli("lint", path).code == 1


def test_a_clean_file_exits_0_and_says_so(tmp_path):
    path = tmp_path / "ok.py"
    path.write_text(BUGGY.replace("    if rank == 0:", "    if t.numel() == 1:"))
    res = run_cli("lint", path)
    assert res.code == 0 and "collcheck lint: 0 findings (1 files" in res.out, res.out
    assert run_cli("lint", path, "--format", "github").out.startswith("::notice title=collcheck lint::")


def test_missing_paths_and_runs_are_one_line_and_exit_2(tmp_path, buggy):
    for argv in (("lint", tmp_path / "nope.py"), ("lint", buggy, "--logs", tmp_path / "no-run")):
        res = run_cli(*argv)
        assert res.code == 2 and res.out == "" and len(res.err.strip().splitlines()) == 1, res


def test_a_folder_that_is_not_a_run_is_exit_2(tmp_path, buggy):
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank-00000.0.msgpack").write_bytes(b"\x00garbage")
    res = run_cli("lint", buggy, "--logs", run)
    assert res.code == 2 and len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err, res


def test_unparsable_and_binary_files_are_skipped_with_a_note(tmp_path, buggy):
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "blob.py").write_bytes(b"\xff\xfe\x00\x01" * 100)
    res = run_cli("lint", tmp_path)
    assert res.code == 1, res.err
    assert "note: skipped" in res.out and "broken.py: does not parse" in res.out


def test_terminal_escapes_and_workflow_commands_in_sources_are_shown_escaped(tmp_path):
    path = tmp_path / "evil.py"
    path.write_text(BUGGY.replace('dist.barrier()', 'dist.barrier(group=g["\\x1b[31m\\n::error::x"])')
                    .replace("        rank = dist.get_rank()", "        rank = dist.get_rank()\n        g = {}"))
    raw = path.read_text()
    assert "\\x1b" in raw  # the file holds the escape as source text...
    path.write_text(raw.replace("\\x1b", "\x1b").replace("\\n::error", "\u2028::error"))  # ...now raw bytes
    res = run_cli("lint", path)
    assert res.code == 1
    assert "\x1b" not in res.out and "\u2028" not in res.out
    gh = run_cli("lint", path, "--format", "github").out
    assert gh.count("\n") == 1 and "\x1b" not in gh


def test_an_expression_nested_too_deep_skips_that_function_with_a_note(tmp_path):
    """Generated code can nest an expression hundreds deep: that function is skipped, not the run."""
    path = tmp_path / "generated.py"
    path.write_text("import torch.distributed as dist\n\ndef f(x):\n    return " + "+".join(["x"] * 700)
                    + "\n\ndef g(rank):\n    if rank == 0:\n        dist.barrier()\n")
    res = run_cli("lint", path)
    assert res.code == 1 and "Traceback" not in res.err, res
    assert f"note: skipped {path}:f: nested too deeply to follow" in res.out
    assert f"{path}:8:9: error rank-branch" in res.out


def test_a_fifo_and_an_oversized_file_are_skipped_not_read(tmp_path, buggy):
    import os

    os.mkfifo(tmp_path / "pipe.py")  # reading it would block forever
    big = tmp_path / "generated.py"
    big.write_text("x = 1\n" * ((5 << 20) // 6 + 1))  # 5 MiB
    res = run_cli("lint", tmp_path)
    assert res.code == 1, res  # train.py's finding still
    assert "pipe.py: not a regular file" in res.out and "generated.py: larger than 4 MiB" in res.out


def test_an_output_file_that_cannot_be_written_is_exit_2(buggy, tmp_path):
    res = run_cli("lint", buggy, "-o", tmp_path / "no" / "such" / "dir" / "out.json")
    assert res.code == 2 and res.out == "" and res.err.startswith("collcheck: error: cannot write ")


COMMAND_NAMES = ("::error file=x::inj.py", "::add-mask::k.py", "::stop-commands::t.py", "a##[add-mask]b.py",
                 "##vso[task.setvariable variable=v]1.py")


@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
@pytest.mark.parametrize("how", ["dot", "relative files", "absolute folder"])
def test_file_names_that_are_ci_commands_never_reach_the_runner(tmp_path, monkeypatch, fmt, how):
    """A pull request may name its files as workflow commands; lint run from inside the checkout
    prints their paths at line starts: none becomes a command, in any format, and the names are
    kept whole where the format can hold them (JSON, SARIF, GitHub's escaped properties)."""
    (tmp_path / "::add-mask::pkg").mkdir()
    names = [*COMMAND_NAMES, "::add-mask::pkg/" + COMMAND_NAMES[0]]
    for name in names:
        (tmp_path / name).write_text(BUGGY)
    monkeypatch.chdir(tmp_path)
    paths = {"dot": ["."], "relative files": names, "absolute folder": [str(tmp_path)]}[how]
    res = run_cli("lint", *paths, "--format", fmt)
    assert res.code == 1, res.err
    commands = runner_commands(res.out)
    if fmt == "github":
        assert [c for c, _, _ in commands] == ["error"] * len(names)
        files = {props["file"].replace("%3A", ":").replace("%2C", ",").replace("%25", "%") for _, props, _ in commands}
        assert {f.removeprefix("./") for f in files} == set(names)
    else:
        assert commands == [], commands
    if fmt == "json":
        assert {f["file"].removeprefix(str(tmp_path) + "/").removeprefix("./") for f in json.loads(res.out)["findings"]} == set(names)
    if fmt == "sarif":
        uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in json.loads(res.out)["runs"][0]["results"]}
        assert {u.removeprefix("./") for u in uris} == set(names)


DEEP = 400
DEEP_KINDS = {  # expressions nested DEEP levels in the tree `ast` builds
    "attribute": "a" + ".b" * DEEP, "subscript": "a" + "[0]" * DEEP, "call": "f" + "()" * DEEP,
    "binary": " + ".join(["x"] * DEEP), "unary": "-" * DEEP + "x", "conditional": "x if y else " * DEEP + "x",
    "lambda": "lambda: " * DEEP + "0", "await": "await " * DEEP + "x", "not": "not " * DEEP + "x",
}
DEEP_PLACES = {  # every place a file can hold an expression, {} the deep one
    "base class": "class C({}):\n    pass", "class keyword": "class C(metaclass={}):\n    pass",
    "decorator": "@{}\ndef h():\n    pass", "default": "def h(a={}):\n    pass",
    "parameter annotation": "def h(a: {}):\n    pass", "return annotation": "def h() -> {}:\n    pass",
    "variable annotation": "v: {} = 1", "module statement": "v = {}", "augmented target": "v[{}] += 1",
    "function body": "def h(rank):\n    v = {}\n    return v", "rank condition": "def h(rank):\n    if rank == ({}):\n        dist.barrier()",
    "collective argument": "def h():\n    dist.all_reduce({})", "with item": "with {} as w:\n    pass",
    "for loop": "for i in {}:\n    dist.barrier()", "while test": "while {}:\n    break",
    "except type": "try:\n    pass\nexcept {}:\n    pass", "assert": "assert {}", "raise": "def h():\n    raise {}",
    "return": "def h():\n    return {}", "async body": "async def h():\n    v = {}", "f-string": "v = f'{{{}}}'",
    "comprehension": "v = [i for i in range(3) if {}]", "keyword argument": "dist.broadcast(t, src={})",
    "slice": "v = t[{}:{}]", "delete": "del a[{}]", "match subject": "match {}:\n    case _:\n        pass",
    "global call": "print({})",
}
BUG = "\n\ndef g(rank):\n    if rank == 0:\n        dist.barrier()\n"


@pytest.mark.parametrize("place", list(DEEP_PLACES))
def test_syntax_nested_400_deep_anywhere_never_ends_lint(tmp_path, place):
    """An expression 400 deep (the parser takes it) in any place of a file, of every kind that
    nests: lint ends with the other function's finding, or says what it skipped; never exit 3."""
    for kind, deep in DEEP_KINDS.items():
        if kind == "await" and "async" not in place:
            continue
        path = tmp_path / f"{kind}.py"
        path.write_text("import torch.distributed as dist\n\n" + DEEP_PLACES[place].replace("{}", deep) + BUG)
        res = run_cli("lint", path)
        assert res.code in (0, 1), (kind, res.err)
        parsed = "does not parse" not in res.out
        assert (res.code == 1) == parsed, (kind, res.out[-500:])
        if parsed:
            assert f"{path.name}:" in res.out and "dist.barrier()" in res.out


def test_syntax_deeper_than_the_parser_takes_is_a_note(tmp_path):
    path = tmp_path / "generated.py"
    path.write_text("v = a" + ".b" * 5000 + "\n")
    res = run_cli("lint", path)
    assert res.code == 0 and "note: skipped" in res.out and "does not parse" in res.out, res.out
