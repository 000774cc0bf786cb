"""Optional compiled hot path of the recorder (fastpath.cpp): built once, used when built.

Why: the Python BackendSelect kernel costs ~150 us per collective (the dispatcher boxes every
argument into Python, the ReduceOp ScriptObject alone costs ~20 us, then the frame walk, dicts,
packing): 1.1x the step time of a small DDP job. Inside a training step caches are cold, so what
counts is how much code runs: the C++ kernel reads the arguments and walks the frames itself, and
for a call site it has seen writes the record with one write(2), no Python code run (~20 us).
Python (hooks.NativeHooks) still builds each template's first record, API calls' records and
everything else, with the same intern tables, so the log does not depend on the path. What the
Python side calls on the loaded module: extension.pyi.

Never compiled inside a job (it takes about a minute): the first `collcheck` command, or
`collcheck build-fastpath` (build.py), compiles it with the installed torch into torch's
extension directory, under a name hashing the sources, torch's version and the Python build. At
run time only a finished build of exactly that name is imported; anything else means the Python
path. COLLCHECK_FASTPATH=0 turns it off, =1 says on stderr which path each process uses.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import extension  # the stub of the built module (extension.pyi)

_HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(_HERE, "fastpath.cpp")
SOURCES = (SOURCE,)  # what the build's name hashes
CFLAGS = ("-O2",)
_loaded = None  # module, or False once loading failed / was refused
_attached = None  # the Recorder the C++ kernels report to


def setting(environ=os.environ) -> str:
    """'off', 'on' (report the outcome on stderr) or 'auto' (silent)."""
    from ...base.settings import Settings

    return Settings.from_env(environ).fastpath


def module_name() -> str:
    import torch

    h = hashlib.sha256()
    for path in SOURCES:
        with open(path, "rb") as f:
            h.update(f.read())
    for part in (torch.__version__, getattr(torch.version, "git_version", ""), sys.version, str(CFLAGS),
                 str(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", ""))):
        h.update(b"\0" + str(part).encode())
    return f"collcheck_fastpath_{h.hexdigest()[:16]}"


def build_directory(name: str | None = None) -> str:
    """Where torch.utils.cpp_extension would build it (same rules, without importing that module)."""
    import torch

    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root is None:
        from torch import _appdirs

        acc = (f"rocm{torch.version.hip.replace('.', '')}" if torch.version.hip is not None else
               f"cu{torch.version.cuda.replace('.', '')}" if torch.version.cuda is not None else "cpu")
        folder = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}_{acc}"
        root = os.path.join(os.path.realpath(_appdirs.user_cache_dir(appname="torch_extensions")), folder)
    return os.path.join(root, name or module_name())


def library_path() -> str:
    name = module_name()
    return os.path.join(build_directory(name), name + (".pyd" if sys.platform == "win32" else ".so"))


def _tool_path() -> str:
    """PATH with the interpreter's script directory (a venv's `pip install ninja`) added."""
    scripts, path = os.path.dirname(sys.executable), os.environ.get("PATH", "")
    return path if scripts in path.split(os.pathsep) else scripts + os.pathsep + path


def missing_tools() -> list[str]:
    """The build tools not found: a C++ compiler (CXX) and ninja."""
    import shutil

    path = _tool_path()
    return [tool for tool in (os.environ.get("CXX", "c++"), "ninja") if shutil.which(tool, path=path) is None]


def build(verbose: bool = False) -> str:
    """Compile the extension (explicit step, ~1 min); returns the path of the shared library."""
    from torch.utils.cpp_extension import load

    os.environ["PATH"] = _tool_path()  # torch's build runs `ninja` from PATH
    name = module_name()
    directory = build_directory(name)
    os.makedirs(directory, exist_ok=True)
    load(name, [SOURCE], extra_cflags=list(CFLAGS), build_directory=directory, verbose=verbose)
    path = library_path()
    if not os.path.exists(path):
        raise RuntimeError(f"build finished but {path} is missing")
    return path


def _say(msg: str) -> None:
    print(f"collcheck: {msg}", file=sys.stderr, flush=True)


def load() -> extension | None:
    """The built extension module, or None (not built, disabled, or failed to import: Python path)."""
    global _loaded
    if _loaded is not None:
        return _loaded or None
    mode = setting()
    _loaded = False
    if mode == "off":
        return None
    try:
        path = library_path()
        if not os.path.exists(path):
            if mode == "on":
                _say("compiled fast path not built for this torch (run `collcheck build-fastpath`); "
                     "using the Python path")
            return None
        name = os.path.basename(path).split(".")[0]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as exc:  # a broken or foreign build must never stop the job
        _say(f"compiled fast path unusable ({type(exc).__name__}: {exc}); using the Python path")
        return None
    _loaded = module
    return module


def install(classify, async_positions: dict[str, int]) -> bool:
    """Register the C++ kernels for every wire op; False leaves the Python kernels to dispatcher.py.
    `async_positions`: op name -> where its schema has async_op (-1: none; dispatcher.py)."""
    from ...logfile.ops import WIRE_OPS

    module = load()
    if module is None:
        return False

    def pos(i):
        return -1 if i is None else i

    specs = [(name, s.pg, pos(s.tensors), pos(s.reduce_op), pos(s.root if s.root is not None else s.peer),
              pos(s.tag), async_positions.get(name, -1), name != "alltoall_base_") for name, s in WIRE_OPS.items()]
    try:
        module.install(classify, specs)
    except Exception as exc:
        _say(f"compiled fast path failed to register ({type(exc).__name__}: {exc}); using the Python path")
        return False
    if setting() == "on":
        _say(f"compiled fast path in use ({os.path.basename(library_path())})")
    return True


def writer_lock():
    """The lock for a new LogWriter: the C++ WriterLock when the extension is loaded (the
    compiled path writes under it), else None (threading.Lock)."""
    module = load()
    return None if module is None else module.WriterLock()


def attach(rec) -> None:
    """Make `rec` the recorder the C++ kernels report to (each new log): its engine is theirs from
    now on; the one before gets an engine in Python."""
    global _attached
    module = _loaded or None
    if module is None:
        return
    from ..engine_native import NativeEngine
    from ..engine_python import PythonEngine

    if _attached is not None and _attached is not rec:
        _attached.use_engine(PythonEngine())
    rec.use_engine(NativeEngine(module))
    _attached = rec
