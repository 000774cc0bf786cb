"""Framework calls (collcheck.knowledge.frameworks): chains split into the user's frames and
installed packages' frames, the collective named in the framework's own terms, chains rendered
with the user's frames kept at any width, DeepSpeed groups named by role.

Chains recorded from real Lightning, accelerate, transformers and DeepSpeed programs
(support/framework_chains.py) must each name the function that issued their collective; hand
chains sample every table entry and the priority rules. The tables' citations are checked
against the installed sources when the cited versions are installed (read, never imported).
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import importlib.util
import pathlib
import subprocess
import sys

import pytest
from support.framework_chains import ABBREV, RECORDED

from collcheck.knowledge.frameworks import (
    FRAMEWORK_NAMES,
    ChainView,
    accelerate,
    deepspeed,
    framework_call,
    group_role,
    lightning,
    lookup,
    package_of,
    split_chain,
    torchmetrics,
    transformers,
)
from collcheck.knowledge.sites import chain_lines


def render_chain(frames, width: int) -> list[str]:
    """A chain's lines (knowledge/sites.py) for a ChainView or the frames themselves."""
    return chain_lines(frames.chain if isinstance(frames, ChainView) else frames, width)
from collcheck.knowledge.frameworks.entry import ANY

SP = "/home/u/.venv/lib/python3.11/site-packages/"
WIN_SP = "C:\\Users\\u\\venv\\Lib\\site-packages\\"
TABLES = (lightning, accelerate, transformers, deepspeed, torchmetrics)


def expand(text: str, windows: bool = False) -> tuple:
    """A recorded chain as frames: '~' files under a site-packages folder, others the user's."""
    frames = []
    for part in text.split(" > "):
        file, line, func = part.rsplit(":", 2)
        if file.startswith("~"):
            for short, full in ABBREV.items():
                if file.startswith(short):
                    file = "~" + full + file[len(short):]
            file = (WIN_SP + file[1:].replace("/", "\\")) if windows else SP + file[1:]
        else:
            file = ("C:\\work\\" if windows else "/home/u/proj/") + file
        frames.append((file, int(line), func))
    return tuple(frames)


def user(name: str = "train.py", line: int = 10, func: str = "main") -> tuple:
    return ("/home/u/proj/" + name, line, func)


def pkg(rel: str, line: int, func: str) -> tuple:
    return (SP + rel, line, func)


# -- recorded chains ------------------------------------------------------------------------------
@pytest.mark.parametrize("windows", [False, True])
@pytest.mark.parametrize(("program", "op", "expected", "text"), RECORDED, ids=[f"{r[0]}-{r[2]}" for r in RECORDED])
def test_recorded_chain_names_its_framework_call(program, op, expected, text, windows):
    chain = expand(text, windows)
    call = framework_call(chain)
    assert (call.name if call else None) == expected
    if call is not None:
        assert call.framework in FRAMEWORK_NAMES.values()
        assert call.words and call.fix and call.user_api
        assert call.site in chain
    view = split_chain(chain)
    shown = [f"{f[0].replace(chr(92), '/').rpartition('/')[2]}:{f[1]} {f[2]}" for f in (view.outer, view.inner)]
    assert shown[0].endswith(":" + text.split(":")[1] + " <module>")
    for width in (40, 200):
        lines = render_chain(view, width)
        assert lines[0] == shown[0] and shown[1] in lines
        assert all(len(line) <= width for line in lines if line.startswith("via "))


def test_recorded_programs_cover_every_framework():
    names = {r[2] for r in RECORDED}
    assert {"LightningModule.log", "_ResultMetric.compute", "_TrainingEpochLoop._broadcast_sigterm_tensor",
            "Trainer.log_dir", "Accelerator.gather_for_metrics", "Accelerator.wait_for_everyone",
            "DataLoaderShard.__iter__", "Trainer.evaluation_loop", "Trainer._finalize_training",
            "DeepSpeedEngine.save_checkpoint", "PartitionedParameterCoordinator.fetch_sub_module"} <= names
    assert sum(r[0] == "ptl" for r in RECORDED) >= 3  # the standalone pytorch_lightning/lightning_fabric copies


def test_self_log_chain_renders_user_frames_and_one_line_per_fold():
    text = next(r[3] for r in RECORDED if r[0] == "pl" and r[2] == "LightningModule.log")
    assert render_chain(split_chain(expand(text)), 200) == [
        "pl_prog.py:41 <module>", "pl_prog.py:37 main", "via Lightning: Trainer.fit > ... > wrapped_forward",
        "pl_prog.py:15 training_step", "via Lightning: LightningModule.log > ... > _sync_ddp"]
    narrow = render_chain(split_chain(expand(text)), 40)
    assert narrow[0] == "pl_prog.py:41 <module>" and narrow[3] == "pl_prog.py:15 training_step"
    assert narrow[2].startswith("via Lightning") and "…" in narrow[2] and len(narrow[2]) == 40


def test_trainer_chain_folds_each_framework():
    text = next(r[3] for r in RECORDED if r[0] == "hf" and r[2] == "Trainer.evaluation_loop")
    lines = render_chain(split_chain(expand(text)), 200)
    assert lines[-2:] == ["via transformers: Trainer.train > ... > Trainer.evaluation_loop",
                          "via accelerate: Accelerator.gather_for_metrics > ... > _gpu_gather_one"]


# -- every table entry, by a sample chain ------------------------------------------------------------
def _samples():
    for table in TABLES:
        for (file, qual), value in table.ENTRIES.items():
            for entry in value if isinstance(value, tuple) else (value,):
                yield table.__name__.rpartition(".")[2], file, qual, entry


@pytest.mark.parametrize(("table", "file", "qual", "entry"), list(_samples()),
                         ids=[f"{s[0]}:{s[2]}:{s[3].via[:1]}" for s in _samples()])
def test_every_entry_names_a_sample_chain(table, file, qual, entry):
    func = "all_reduce" if qual == ANY else qual.rpartition(".")[2]
    chain = [user(), pkg(file, entry.lines[0] if entry.lines else 1, func)]
    if entry.via:  # what it calls: a function of its package no table knows
        chain.append(pkg(file.partition("/")[0] + "/_callee.py", 5, entry.via[0]))
    call = framework_call(chain)
    assert call is not None and call.name == (func if qual == ANY else qual)
    assert call.fix and call.user_api and call.words == entry.words.replace("{func}", func)
    if entry.via:  # anything else it calls is not this entry
        assert framework_call([*chain[:2], pkg(file.partition("/")[0] + "/_callee.py", 5, "_other_")]) is None


# -- priorities ---------------------------------------------------------------------------------------
_FDIST = "lightning/fabric/utilities/distributed.py"


def test_specific_outer_entry_names_a_generic_helper():
    gather = [user(), pkg("accelerate/accelerator.py", 3151, "gather_for_metrics"),
              pkg("accelerate/accelerator.py", 3107, "gather"), pkg("accelerate/utils/operations.py", 378, "wrapper"),
              pkg("accelerate/utils/operations.py", 439, "gather")]
    assert framework_call(gather).name == "Accelerator.gather_for_metrics"
    assert framework_call([gather[0], *gather[2:]]).name == "Accelerator.gather"  # equals: the outer one
    assert framework_call([gather[0], *gather[3:]]).name == "gather"


def test_strategy_barrier_from_checkpoint_saving_is_the_save():
    barrier = [pkg("lightning/pytorch/trainer/trainer.py", 1465, "save_checkpoint"),
               pkg("lightning/pytorch/strategies/ddp.py", 303, "barrier")]
    call = framework_call([user(), *barrier])
    assert (call.name, call.user_api) == ("Trainer.save_checkpoint", "trainer.save_checkpoint(...)")
    assert "on every rank" in call.fix and "is_global_zero" in call.fix
    hook = [user(), pkg("lightning/pytorch/trainer/trainer.py", 584, "fit"),
            pkg("lightning/pytorch/callbacks/model_checkpoint.py", 600, "_save_checkpoint"), *barrier]
    assert framework_call(hook).name == "ModelCheckpoint._save_checkpoint"
    assert framework_call([user(), barrier[1]]).name == "DDPStrategy.barrier"


def test_sync_ddp_is_named_by_the_feature_that_called_it():
    reduce = [pkg("lightning/pytorch/strategies/ddp.py", 367, "reduce"), pkg(_FDIST, 178, "_sync_ddp_if_available"),
              pkg(_FDIST, 213, "_sync_ddp")]
    step = [user(func="training_step"), pkg("lightning/pytorch/core/module.py", 531, "log"),
            pkg("lightning/pytorch/trainer/connectors/logger_connector/result.py", 225, "update"), *reduce]
    call = framework_call(step)
    assert (call.framework, call.name, call.user_api) == ("Lightning", "LightningModule.log", "self.log(..., sync_dist=True)")
    assert call.fix == ("call `self.log(..., sync_dist=True)` on every rank, or use `rank_zero_only=True` "
                        "without `sync_dist`")
    # EarlyStopping reading the callback metrics: the metrics' reduction, not the stop vote
    es = pkg("lightning/pytorch/callbacks/early_stopping.py", 227, "_run_early_stopping_check")
    epoch = [user(), pkg("lightning/pytorch/trainer/trainer.py", 584, "fit"), es,
             pkg("lightning/pytorch/trainer/connectors/logger_connector/result.py", 248, "compute"), *reduce]
    assert framework_call(epoch).name == "_ResultMetric.compute"
    vote = [user(), es, pkg("lightning/pytorch/strategies/parallel.py", 109, "reduce_boolean_decision"), *reduce]
    assert framework_call(vote).name == "EarlyStopping._run_early_stopping_check"
    assert framework_call([user(), *reduce]).name == "DDPStrategy.reduce"


def test_a_collective_the_users_code_issues_is_the_users():
    fit = [user(), pkg("lightning/pytorch/trainer/trainer.py", 584, "fit"),
           pkg("lightning/pytorch/strategies/strategy.py", 641, "__call__")]
    assert framework_call(fit).name == "_ForwardRedirection.__call__"  # DDP's own forward
    assert framework_call([*fit, user(func="training_step")]) is None  # a dist.all_reduce in training_step
    assert framework_call([user()]) is None and framework_call(()) is None and framework_call(None) is None
    assert framework_call([user(), pkg("unknownpkg/mod.py", 3, "helper")]) is None


def test_standalone_lightning_packages_use_the_same_tables():
    for rel in ("pytorch_lightning/strategies/ddp.py", "lightning/pytorch/strategies/ddp.py"):
        assert framework_call([user(), pkg(rel, 303, "barrier")]).name == "DDPStrategy.barrier"
    for rel in ("lightning_fabric/utilities/distributed.py", _FDIST):
        assert framework_call([user(), pkg(rel, 213, "_sync_ddp")]).framework == "Lightning"


def test_transformers_step_named_over_accelerate_and_end_of_training_says_why():
    gather = [pkg("accelerate/accelerator.py", 3107, "gather"), pkg("accelerate/utils/operations.py", 439, "gather")]
    items = [user(), pkg("transformers/trainer.py", 1576, "train"), pkg("transformers/trainer.py", 1934, "_run_epoch"),
             pkg("transformers/trainer.py", 2350, "_get_num_items_in_batch"), *gather]
    call = framework_call(items)
    assert (call.framework, call.name, call.user_api) == ("transformers", "Trainer._get_num_items_in_batch",
                                                          "trainer.train()")
    end = [user(), pkg("transformers/trainer.py", 1576, "train"), pkg("transformers/trainer.py", 2017, "_finalize_training"),
           pkg("transformers/trainer.py", 4217, "store_flos"),
           pkg("transformers/trainer_pt_utils.py", 290, "distributed_broadcast_scalars")]
    call = framework_call(end)
    assert call.name == "Trainer._finalize_training" and "EarlyStoppingCallback" in call.fix
    assert framework_call([end[0], end[3], end[4]]).name == "Trainer.store_flos"


def test_deepspeed_comm_wrappers_name_the_op_and_the_engine_says_why():
    comm = [pkg("deepspeed/comm/comm.py", 129, "log_wrapper"), pkg("deepspeed/comm/comm.py", 477, "barrier"),
            pkg("deepspeed/comm/torch.py", 519, "barrier")]
    call = framework_call([user(), *comm])
    assert (call.framework, call.words, call.name) == ("DeepSpeed", "`deepspeed.comm.barrier`", "barrier")
    save = framework_call([user(), pkg("deepspeed/runtime/engine.py", 4900, "save_checkpoint"), *comm])
    assert (save.name, save.user_api) == ("DeepSpeedEngine.save_checkpoint", "engine.save_checkpoint(...)")
    assert save.fix.startswith("call `engine.save_checkpoint(...)` on every rank")
    hostile = framework_call([user(), pkg("deepspeed/comm/comm.py", 1, "x\x1b[2J{func}")])
    assert "\x1b" not in hostile.words and "\\x1b" in hostile.words


# -- package_of on any path -------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "package"), [
    (SP + "lightning/pytorch/trainer/trainer.py", "lightning"),
    ("/usr/lib/python3/dist-packages/accelerate/state.py", "accelerate"),
    (WIN_SP + "transformers\\trainer.py", "transformers"),
    ("C:\\Python311\\Lib\\Site-Packages\\deepspeed\\comm\\comm.py", "deepspeed"),
    ("D:/mixed\\lib/site-packages\\torchmetrics/metric.py", "torchmetrics"),
    (SP + "typing_extensions.py", "typing_extensions"),
    (SP + "foo-1.0-py3.11.egg/foo/bar.py", "foo"),
    ("/a/site-packages/b/site-packages/inner/x.py", "inner"),
    ("site-packages/rel/x.py", "rel"),
    ("/home/u/train.py", None), ("train.py", None), ("<frozen runpy>", None), ("<string>", None), ("", None),
    (SP, None), (SP.rstrip("/"), None), ("/x/notsite-packages/y.py", None), ("/x/site-packagesX/y.py", None),
    (SP + "\x1b[31mevil\x07/x.py", "\x1b[31mevil\x07"), (SP + "é\u202edir/x.py", "é\u202edir"),
    (None, None), (b"/x/site-packages/a/b.py", None), (42, None), (("tuple",), None),
])
def test_package_of(path, package):
    assert package_of(path) == package


def test_package_of_long_paths():
    assert package_of("/d" * 500_000 + "/site-packages/pkg/" + "x" * 100_000 + ".py") == "pkg"
    assert package_of("/d" * 500_000 + "/train.py") is None


def test_framework_names():
    assert {p: FRAMEWORK_NAMES[p] for p in ("lightning", "pytorch_lightning", "lightning_fabric", "accelerate",
                                            "transformers", "deepspeed", "torchmetrics")} == {
        "lightning": "Lightning", "pytorch_lightning": "Lightning", "lightning_fabric": "Lightning",
        "accelerate": "accelerate", "transformers": "transformers", "deepspeed": "DeepSpeed",
        "torchmetrics": "torchmetrics"}
    view = split_chain([user(), pkg("wandb/sdk/run.py", 1, "log")])
    assert view.folds == (("wandb", (pkg("wandb/sdk/run.py", 1, "log"),)),)


# -- split and render --------------------------------------------------------------------------------
def test_split_chain_parts():
    fit, hook = pkg("lightning/pytorch/trainer/trainer.py", 584, "fit"), user("cb.py", 43, "on_train_epoch_end")
    metric = pkg("torchmetrics/metric.py", 549, "wrapped_func")
    barrier = pkg("lightning/pytorch/strategies/ddp.py", 303, "barrier")
    view = split_chain([user(), fit, metric, hook, barrier])
    assert isinstance(view, ChainView) and view.user == (user(), hook)
    assert (view.outer, view.inner) == (user(), hook)
    assert view.folds == (("Lightning", (fit,)), ("torchmetrics", (metric,)), ("Lightning", (barrier,)))
    assert view.call.name == "DDPStrategy.barrier"
    assert render_chain(view, 80) == render_chain(view.chain, 80) == [
        "train.py:10 main", "via Lightning: Trainer.fit", "via torchmetrics: wrapped_func",
        "cb.py:43 on_train_epoch_end", "via Lightning: DDPStrategy.barrier"]
    sandwich = split_chain([user(), fit, metric, pkg("lightning/pytorch/strategies/ddp.py", 367, "reduce")])
    assert render_chain(sandwich, 100)[1:] == ["via Lightning: Trainer.fit > DDPStrategy.reduce"]


def test_split_chain_survives_damaged_chains():
    view = split_chain([None, ("only", 2), (b"f", "7", 3), user(), (SP + "a/b.py", True, None)])
    assert (view.outer, view.inner) == (("", None, "?"), user())  # a frame nothing is known of: not a package's
    assert view.chain[2] == ("", None, "?") and view.chain[4] == (SP + "a/b.py", None, "?")
    assert split_chain(None).user == () and render_chain(split_chain("nonsense"), 40) == []


@pytest.mark.parametrize("width", [1, 12, 40, 80, 200, 1000])
def test_user_frames_survive_any_width(width):
    frames = [user("launch.py", 5, "<module>"), *[user("train.py", i, f"step{i}") for i in range(8)],
              *[pkg(f"lightning/pytorch/m{i}.py", i, f"f{i}") for i in range(30)],
              user("module_with_a_rather_long_name.py", 43, "on_train_epoch_end_hook"),
              pkg("lightning/pytorch/strategies/ddp.py", 303, "barrier")]
    lines = render_chain(frames, width)
    assert lines[0] == "launch.py:5 <module>" and "module_with_a_rather_long_name.py:43 on_train_epoch_end_hook" in lines
    assert lines[1] == "… 7 frames of the program" and lines[2] == "train.py:7 step7"
    assert [line.startswith("via ") for line in lines] == [False] * 3 + [True, False, True]
    assert lines[3].startswith("via Lightning: ") == (width >= 40)
    assert all(len(line) <= max(width, 12) for line in lines if line.startswith("via "))


def test_hostile_names_are_escaped_and_bounded():
    evil = ("/tmp/\x1b]0;pwned\x07" + "n" * 200_000 + ".py", 1, "f\r\u202e" + "g" * 50_000)
    lines = render_chain([evil, pkg("deepspeed/runtime/engine.py", 4900, "save_checkpoint")], 60)
    assert not any(ch in "".join(lines) for ch in "\x1b\x07\r\u202e")
    assert len(lines) == 2 and len(lines[0]) < 400 and len(lines[1]) <= 60


# -- DeepSpeed groups by role -------------------------------------------------------------------------
def test_group_role():
    dp = [user(), pkg("deepspeed/__init__.py", 569, "initialize"), pkg("deepspeed/utils/groups.py", 780,
                                                                         "_get_data_parallel_group"),
          pkg("deepspeed/utils/groups.py", 734, "_clone_world_group"), pkg("deepspeed/comm/comm.py", 204, "new_group"),
          pkg("deepspeed/comm/torch.py", 540, "new_group")]
    assert group_role(dp) == "DeepSpeed data-parallel group (a copy of the world group)"
    mp = "deepspeed/utils/groups.py"
    assert group_role([pkg(mp, 356, "_create_model_parallel")]) == "DeepSpeed data-parallel group"
    assert group_role([pkg(mp, 363, "_create_model_parallel")]) == "DeepSpeed model-parallel group"
    assert group_role([pkg(mp, 999, "_create_model_parallel")]) == "DeepSpeed model- or data-parallel group"
    assert group_role([pkg(mp, 524, "_create_expert_and_data_parallel")]) == "DeepSpeed expert-parallel group"
    assert group_role(pkg("deepspeed/comm/torch.py", 282, "init_process_group")).startswith("DeepSpeed world group")
    assert group_role(pkg("deepspeed/comm/torch.py", 540, "new_group")) is None  # the site alone: no role
    assert group_role([user(), pkg("lightning/pytorch/strategies/ddp.py", 1, "setup")]) is None
    assert group_role(None) is None and group_role([None, 3]) is None


# -- no framework imported ----------------------------------------------------------------------------
def test_importing_does_not_import_any_framework():
    root = str(pathlib.Path(lookup.__file__).parents[3])
    code = ("import sys; sys.path.insert(0, %r); import collcheck.knowledge.frameworks as f; "
            "f.framework_call([('/x/site-packages/lightning/pytorch/strategies/ddp.py', 303, 'barrier')]); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in %r))")
    names = ("lightning", "pytorch_lightning", "lightning_fabric", "lightning_utilities", "accelerate",
             "transformers", "deepspeed", "torchmetrics")
    out = subprocess.run([sys.executable, "-c", code % (root, names)], capture_output=True, text=True, check=True,
                         timeout=60)
    assert out.stdout.strip() == "[]"


# -- the citations, against the installed sources ------------------------------------------------------
@functools.cache
def _functions(path: pathlib.Path) -> dict:
    """qualified name -> (first line, last line) of every function of a source file."""
    out = {}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(prefix + child.name, (child.lineno, child.end_lineno))
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)
    walk(ast.parse(path.read_text(encoding="utf-8")), "")
    return out


def _installed(table) -> pathlib.Path | None:
    """The site-packages folder holding the cited version, or None (not installed, another version)."""
    try:
        if any(importlib.metadata.version(d) != table.VERSION for d in table.DISTRIBUTIONS):
            return None
        spec = importlib.util.find_spec(table.DISTRIBUTIONS[0])  # a top-level name: found, not imported
    except (importlib.metadata.PackageNotFoundError, ValueError, ImportError):
        return None
    return pathlib.Path(spec.origin).parents[1] if spec and spec.origin else None


def _unshared(path: pathlib.Path, file: str, qual: str, entries: dict) -> bool:
    """No other function of the file can be taken for this entry: every function sharing its
    name has an entry, means the same (SAME_MEANING), or, where the name's entries all have a
    `via`, never calls one of those functions."""
    short = qual.rpartition(".")[2]
    mine = [(q, e) for (f, q), v in entries.items() if f == file and q.rpartition(".")[2] == short
            for e in (v if isinstance(v, tuple) else (v,))]
    vias = {v for _, e in mine for v in e.via} if all(e.via for _, e in mine) else None
    lines = path.read_text(encoding="utf-8").splitlines()
    for other, (first, last) in _functions(path).items():
        if other.rpartition(".")[2] != short or other in {q for q, _ in mine} or (file, other) in SAME_MEANING:
            continue
        body = "\n".join(lines[first - 1:last])
        if vias is None or any(f"{v}(" in body for v in vias):
            return False
    return True


# functions sharing a table entry's name in its file, with the same meaning (the entry's comment says so)
SAME_MEANING = {("accelerate/state.py", "AcceleratorState.wait_for_everyone"),
                ("accelerate/data_loader.py", "MpDeviceLoaderWrapper.__iter__")}


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.__name__.rpartition(".")[2])
def test_citations_match_the_installed_sources(table):
    site = _installed(table)
    if site is None:
        pytest.skip(f"{table.DISTRIBUTIONS} {table.VERSION} not installed")
    copies = {file: [file] + [prefix + file[len(full):] for prefix, full in table.ALIASES.items()
                              if file.startswith(full)] for file, _ in [*table.ENTRIES, *table.NAMES]}
    for (file, qual), value in table.ENTRIES.items():
        for copy in copies[file]:
            funcs = _functions(site / copy)
            if qual == ANY:
                continue
            assert qual in funcs, (copy, qual)
            first, last = funcs[qual]
            for entry in value if isinstance(value, tuple) else (value,):
                assert entry.lines and all(first <= at <= last for at in entry.lines), (copy, qual, entry.at)
            assert _unshared(site / copy, file, qual, table.ENTRIES), (copy, qual)
    for file, qual in table.NAMES:
        assert qual in _functions(site / file), qual
    for (file, qual), spec in getattr(table, "GROUP_ROLES", {}).items():
        first, last = _functions(site / file)[qual]
        lines = (site / file).read_text(encoding="utf-8").splitlines()
        for at, _ in spec[:-1] if isinstance(spec, tuple) else ():
            assert first <= at <= last and "new_group" in lines[at - 1], (file, at)
