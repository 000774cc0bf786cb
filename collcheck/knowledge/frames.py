"""Whose code a frame is: the user's program, an installed package (torch, a framework), the
standard library or Python itself. The one answer every layer uses, from the path alone.

A frame's path was recorded on another machine (a cluster node's venv, a Windows laptop, a conda
env), so it is read by its own markers, never against this machine's sysconfig: a file below
`site-packages` / `dist-packages` belongs to the installed package named next; a file of the
standard library sits in `lib/pythonX.Y/` (POSIX layouts: venv, conda, pyenv, the system's,
macOS frameworks) or `PythonXY/Lib/` (Windows); `<frozen ...>` is Python's own. Anything else is
the program's (a `python -c` program's `<string>` too). Inside the job the recorder adds what only it knows, the roots of
this torch and this collcheck (an editable checkout), as `roots`.

A path is any string (a Windows path, control characters, megabytes of name): it is only looked
at, never opened. Standard library only: the recorder inside the training job classifies its
frames here too.
"""

from __future__ import annotations

import re

USER = "user"  # the program: the user's own files (and a frame whose path is not a string)
STDLIB = "stdlib"  # the Python standard library (threading's bootstrap, runpy, contextlib)
PYTHON = "python"  # Python's own code without a file: <frozen ...> (a `<string>` or `<stdin>` is the user's)
TORCH, COLLCHECK = "torch", "collcheck"  # two installed packages the views treat apart
FX_GENERATED = "<eval_with_key>"  # code torch.fx generated (a compiled graph's forward): torch's, never a file
NOT_THE_PROGRAM = frozenset({STDLIB, PYTHON, TORCH, COLLCHECK})
# installed packages that only wrap the call they pass on (typing_extensions' @deprecated around
# torch APIs): never part of anybody's call chain
WRAPPERS = frozenset({"typing_extensions"})

_MARKERS = ("/site-packages/", "/dist-packages/")
_STDLIB = re.compile(r"/lib(?:64)?/python\d+(?:\.\d+)*t?/"  # POSIX: venv, conda, pyenv, the system's, macOS
                     r"|^/[a-z]:/(?:.*/)?(?:python\d+|versions/\d[\w.]*|(?:ana|mini)conda\d*(?:/envs/[^/]+)?)/lib/")  # Windows
# a torch source checkout (an editable install): its own top-level packages below a `torch` folder
_TORCH_CHECKOUT = re.compile(r"/torch/(?:distributed|nn|autograd|utils|_dynamo|_functorch|_inductor|fx|multiprocessing"
                             r"|optim|amp|cuda|testing|_tensor\.py|_ops\.py|functional\.py)")
# a collcheck checkout (an editable install): the recorder's frames, which a job's stacks hold
# (a Flight Recorder dump of a recorded job: the dispatcher kernel sits below the user's call)
_COLLCHECK_CHECKOUT = re.compile(r"/collcheck/(?:capture|simnccl)/[\w/]+\.py$")

# a package's own test programs, shipped inside it: where a job runs them (torch's distributed
# test suite), they are the program, not the library (package -> folders inside it)
OWN_TESTS = {"torch": ("testing/_internal/",)}

# (FRAMEWORK_NAMES) package -> the framework name people know it by; other packages keep their own
FRAMEWORK_NAMES = {
    "lightning": "Lightning", "pytorch_lightning": "Lightning", "lightning_fabric": "Lightning",
    "lightning_utilities": "Lightning",  # Lightning's own helpers (apply_to_collection between its frames)
    "accelerate": "accelerate", "transformers": "transformers", "deepspeed": "DeepSpeed",
    "torchmetrics": "torchmetrics",
}


def classify(path, roots: tuple = ()) -> tuple[str, str | None]:
    """(owner, the path inside it) of a frame's file: owner is USER, STDLIB, PYTHON or an installed
    package's top-level name ("torch", "lightning", "collcheck"); the inside path
    ('distributed/distributed_c10d.py', `/` separators) for a package, else None. `roots`:
    ((folder + separator, owner), ...) known to hold one package's files, looked at first."""
    if path.__class__ is not str:
        return USER, None
    if path.startswith("<frozen"):
        return PYTHON, None
    if path.startswith(FX_GENERATED):  # '<eval_with_key>.3 from /.../torch/fx/...py:1738 in wrapped'
        return TORCH, None
    for root, name in roots:
        if path.startswith(root):
            return _tests_are_the_program(name, path[len(root):].replace("\\", "/"))
    rel = relative_path(path)
    if rel is not None:
        package, _, inside = rel.partition("/")
        return _tests_are_the_program(package.removesuffix(".py") or USER, inside or None)
    p = "/" + path.replace("\\", "/")
    low = p.lower()
    if _STDLIB.search(low):
        return STDLIB, None
    m = _TORCH_CHECKOUT.search(p)
    if m is not None:
        return _tests_are_the_program(TORCH, p[m.start() + len("/torch/"):])
    m = _COLLCHECK_CHECKOUT.search(p)
    if m is not None:
        return COLLCHECK, p[m.start() + len("/collcheck/"):]
    return USER, None


def _tests_are_the_program(package: str, inside: str | None) -> tuple[str, str | None]:
    if inside is not None and inside.startswith(OWN_TESTS.get(package, ("\0",))):
        return USER, None
    return package, inside


def owner(path, roots: tuple = ()) -> str:
    return classify(path, roots)[0]


def in_chain(owner_: str) -> bool:
    """Whether a frame of this owner is part of the program's call chain: the user's files and the
    installed frameworks it calls (their loop calls the user back), not torch, collcheck, the
    standard library or Python itself."""
    return owner_ not in NOT_THE_PROGRAM and owner_ not in WRAPPERS


def relative_path(path) -> str | None:
    """'lightning/pytorch/trainer/trainer.py' for a file under site-packages/dist-packages (the
    last such folder, `/` separators), None for the user's program or a path that is not a string."""
    if path.__class__ is not str:
        return None
    p = "/" + path.replace("\\", "/")
    low = p.lower()  # Windows folders may be spelled Site-Packages
    at = max(low.rfind(m) for m in _MARKERS)
    if at < 0:
        return None
    rel = p[at + len(_MARKERS[0]):]
    head, _, rest = rel.partition("/")
    if head.endswith((".egg", ".whl")) and rest:  # an egg's or a zipped wheel's folder holds the package
        rel = rest
    return rel or None


def package_of(path) -> str | None:
    """The installed framework or library a frame's file belongs to (a single-module package
    without `.py`), None for the program's own file, the standard library or Python's."""
    who = owner(path)
    return None if who in (USER, STDLIB, PYTHON) else who


def framework_name(package: str) -> str:
    return FRAMEWORK_NAMES.get(package, package)


def frames_of(chain) -> tuple:
    """The chain as (file: str, line: int | None, function: str) tuples, whatever a damaged log
    held (a frame that is not a triple, a line that is not a number): never raises."""
    if not isinstance(chain, (tuple, list)):
        return ()
    if len(chain) == 3 and isinstance(chain[0], str):  # one frame (a call site) given alone
        chain = (chain,)
    out = []
    for f in chain:
        if not isinstance(f, (tuple, list)) or len(f) < 3:
            out.append(("", None, "?"))
            continue
        file, line, func = f[0], f[1], f[2]
        out.append((file if isinstance(file, str) else "",
                    line if isinstance(line, int) and not isinstance(line, bool) else None,
                    func if isinstance(func, str) else "?"))
    return tuple(out)
