"""Which installed package a frame's file belongs to, read from the path alone.

Logs come from other machines: a path is any string (a Windows path, a path with control
characters, megabytes of name), never opened here. A file under `site-packages` or
`dist-packages` is an installed package's; anything else is the user's program.
"""

from __future__ import annotations

_MARKERS = ("/site-packages/", "/dist-packages/")

# package -> the framework name people know it by; other packages keep their own name
FRAMEWORK_NAMES = {
    "lightning": "Lightning", "pytorch_lightning": "Lightning", "lightning_fabric": "Lightning",
    "lightning_utilities": "Lightning",  # Lightning's own helpers (apply_to_collection between its frames)
    "accelerate": "accelerate", "transformers": "transformers", "deepspeed": "DeepSpeed",
    "torchmetrics": "torchmetrics",
}


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
    """The top-level package of a frame's file when it is installed (a single-module package
    without `.py`), None for the user's program."""
    rel = relative_path(path)
    if rel is None:
        return None
    return rel.partition("/")[0].removesuffix(".py") or None


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
