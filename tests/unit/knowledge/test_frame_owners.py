"""Whose code a frame is (knowledge/frames.py), from the recorded path alone: a log recorded under
another prefix (a Linux venv read on macOS, a Windows install, a conda env, an editable torch)
classifies the same frames as the program's as the recording machine did."""

from __future__ import annotations

import contextlib
import os
import sysconfig
import threading

import pytest
import torch

from collcheck.knowledge import frames

LAYOUTS = [  # (recorded path, owner): the program, installed packages, the standard library, Python
    ("/home/u/proj/train.py", frames.USER),
    ("/home/u/proj/lib/train.py", frames.USER),  # a folder named lib is the program's
    ("/srv/app/python3/lib/model.py", frames.USER),
    ("C:\\Users\\u\\proj\\lib\\train.py", frames.USER),
    ("/home/u/proj/.venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", "torch"),
    ("/home/u/proj/.venv/lib/python3.11/site-packages/lightning/pytorch/trainer/trainer.py", "lightning"),
    ("/usr/lib/python3/dist-packages/accelerate/accelerator.py", "accelerate"),
    ("/opt/conda/envs/train/lib/python3.11/site-packages/deepspeed/runtime/engine.py", "deepspeed"),
    ("C:\\Users\\u\\proj\\.venv\\Lib\\site-packages\\transformers\\trainer.py", "transformers"),
    ("C:\\Python311\\Lib\\Site-Packages\\torchmetrics\\metric.py", "torchmetrics"),
    ("/usr/lib/python3.11/site-packages/foo-1.0.egg/foo/bar.py", "foo"),
    ("/home/u/proj/.venv/lib/python3.11/site-packages/typing_extensions.py", "typing_extensions"),
    ("/usr/lib/python3.11/threading.py", frames.STDLIB),
    ("/usr/lib64/python3.12/runpy.py", frames.STDLIB),
    ("/opt/conda/envs/train/lib/python3.11/threading.py", frames.STDLIB),
    ("/Users/u/.pyenv/versions/3.11.7/lib/python3.11/contextlib.py", frames.STDLIB),
    ("/Library/Frameworks/Python.framework/Versions/3.11/lib/python3.11/threading.py", frames.STDLIB),
    ("/opt/homebrew/Cellar/python@3.13/3.13.1/Frameworks/Python.framework/Versions/3.13/lib/python3.13t/runpy.py",
     frames.STDLIB),
    ("C:\\Program Files\\Python311\\Lib\\threading.py", frames.STDLIB),
    ("C:\\Users\\u\\miniconda3\\envs\\train\\Lib\\runpy.py", frames.STDLIB),
    ("C:\\Users\\u\\.pyenv\\pyenv-win\\versions\\3.11.7\\Lib\\threading.py", frames.STDLIB),
    ("/home/u/src/pytorch/torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py", frames.TORCH),  # editable torch
    ("/work/collcheck/collcheck/capture/dispatcher.py", frames.COLLCHECK),  # editable collcheck: the recorder's
    ("/work/collcheck/collcheck/capture/native/fastpath.py", frames.COLLCHECK),
    ("/home/u/proj/collcheck/train.py", frames.USER),  # a program's folder of that name: its own
    # a package's own tests run as the job (torch's distributed test suite): the program's
    ("/home/u/.venv/lib/python3.11/site-packages/torch/testing/_internal/distributed/distributed_test.py", frames.USER),
    ("/home/u/src/pytorch/torch/testing/_internal/common_distributed.py", frames.USER),
    ("C:\\venv\\Lib\\site-packages\\torch\\testing\\_internal\\common_distributed.py", frames.USER),
    ("/home/u/.venv/lib/python3.11/site-packages/torch/testing/_comparison.py", frames.TORCH),  # the library's
    ("<frozen importlib._bootstrap>", frames.PYTHON),
    ("<string>", frames.USER),  # `python -c`: the program
    ("<stdin>", frames.USER),
    (None, frames.USER),  # a damaged log: never raises
    ("\x1b]8;;x\x07/site-packages/", frames.USER),
]


@pytest.mark.parametrize("path, owner", LAYOUTS)
def test_every_layout_is_read_by_its_own_markers(path, owner):
    assert frames.owner(path) == owner
    if owner in (frames.USER, frames.STDLIB, frames.PYTHON):
        assert frames.package_of(path) is None
    else:
        assert frames.package_of(path) == owner
    assert frames.in_chain(owner) == (owner not in (frames.STDLIB, frames.PYTHON, frames.TORCH, frames.COLLCHECK,
                                                    "typing_extensions"))


# this machine's own files, as the recorder sees them in a job (the recorder passes the roots of
# this torch and this collcheck), and the prefixes other machines record them under
HERE = {
    "torch": (torch.distributed.distributed_c10d.__file__, frames.TORCH),
    "stdlib": (threading.__file__, frames.STDLIB),
    "stdlib2": (contextlib.__file__, frames.STDLIB),
    "user": (__file__, frames.USER),
}
ROOTS = ((os.path.dirname(torch.__file__) + os.sep, frames.TORCH),)
PREFIXES = {  # where another machine keeps the same layout
    "linux-venv": ("/home/u/.venv/lib/python3.11", "/"),
    "macos-pyenv": ("/Users/u/.pyenv/versions/3.11.7/lib/python3.11", "/"),
    "conda": ("/opt/conda/envs/train/lib/python3.11", "/"),
    "windows": ("C:\\Users\\u\\AppData\\Local\\Programs\\Python\\Python311\\Lib", "\\"),
}


def _moved(path: str, prefix: str, sep: str) -> str:
    """`path` as a machine with `prefix` records it: the part after the library folder kept."""
    lib = sysconfig.get_paths()["stdlib"]
    for base in (os.path.join(sysconfig.get_paths()["purelib"], ""), os.path.join(lib, "")):
        if path.startswith(base):
            rest = path[len(base):]
            sub = ("site-packages" + sep) if base.startswith(os.path.join(sysconfig.get_paths()["purelib"], "")) \
                and sysconfig.get_paths()["purelib"] != lib else ""
            return prefix + sep + sub + rest.replace("/", sep)
    return ("C:\\Users\\u\\proj\\" if sep == "\\" else "/home/u/proj/") + os.path.basename(path)


@pytest.mark.parametrize("prefix", list(PREFIXES))
@pytest.mark.parametrize("what", list(HERE))
def test_a_log_from_another_prefix_classifies_as_the_recording_machine_did(what, prefix):
    path, owner = HERE[what]
    assert frames.owner(path, ROOTS) == owner  # in the job, on this machine
    assert frames.owner(path) == owner  # reading this machine's log, by its markers alone
    moved = _moved(path, *PREFIXES[prefix])
    assert frames.owner(moved) == owner, moved  # the same frame recorded on another machine


def test_the_recorders_walk_and_the_readers_agree_on_a_chain():
    """The chain the recorder keeps (callsite.walk's verdicts) is the chain a reader would keep of
    the same frames: in_chain(owner) on the recorded paths."""
    from collcheck.capture import callsite

    def user_code():
        return callsite.walk(__import__("sys")._getframe(), full=True)

    chain, _, stack, _ = user_code()
    kept = [f.f_code.co_filename for f in chain]
    assert kept and all(frames.in_chain(frames.owner(p)) for p in kept)
    assert [p for p, _, _ in stack if frames.in_chain(frames.owner(p))] == kept


def test_a_packages_own_tests_are_the_program_in_the_recorders_walk_too():
    """torch's distributed tests live inside the torch package: the recorder keeps their frames
    in the chain (its roots say torch's folder), as a reader of the log would."""
    from collcheck.capture import callsite

    test_file = os.path.join(os.path.dirname(torch.__file__), "testing", "_internal", "common_distributed.py")
    code = compile("def f():\n    return sys._getframe()\n", test_file, "exec")
    scope = {"sys": __import__("sys")}
    exec(code, scope)
    chain, _, _, _ = callsite.walk(scope["f"](), full=False)
    assert chain and chain[0].f_code.co_filename == test_file
