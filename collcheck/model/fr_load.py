"""Reading PyTorch Flight Recorder dumps safely: the pickle the NCCL watchdog writes
(`torch._C._distributed_c10d._dump_nccl_trace()` / `_dump_fr_trace()`) and the JSON variants.

A dump is data from someone's machine: the pickle is decoded by an unpickler that builds only
plain containers and scalars and refuses every global (a crafted dump that names a callable
is an error, and nothing of it runs). Detection is by content, never by file name.
"""

from __future__ import annotations

import io
import json
import os
import pickle

from ..reader import LogError

MAX_DUMP = 512 * 1024 * 1024  # a larger file is not a dump this reader will hold in memory
SUPPORTED_MAJOR = 2  # dump versions "2.x": torch has written 2.3, 2.4, 2.7 and (2.13) 2.10, same fields
_PICKLE_PROTOCOLS = frozenset(range(2, 6))


class _Refused(pickle.UnpicklingError):
    """The pickle names something other than data."""


class _DataOnly(pickle.Unpickler):
    """Plain containers and scalars only: any global (class, function) is refused."""

    def find_class(self, module, name):
        raise _Refused(f"refused to load {module}.{name}: a Flight Recorder dump holds only data")

    def persistent_load(self, pid):
        raise _Refused("refused a persistent id: a Flight Recorder dump holds only data")


def sniff(path: str) -> str | None:
    """'pickle' or 'json' when the file looks like a Flight Recorder dump, else None."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return None
    if len(head) >= 2 and head[0] == 0x80 and head[1] in _PICKLE_PROTOCOLS:
        return "pickle"
    text = head.lstrip()
    if text.startswith(b"{") and (b'"version"' in head or b'"entries"' in head or b'"pg_config"' in head):
        return "json"
    if text.startswith(b"{"):  # keys may come in any order: look a little further
        try:
            with open(path, "rb") as f:
                more = f.read(4096)
        except OSError:
            return None
        if b'"pg_config"' in more or b'"entries"' in more:
            return "json"
    return None


def load_dump(path: str) -> dict:
    """One rank's dump as a dict, its version checked. LogError (one line) for anything else."""
    kind = sniff(path)
    if kind is None:
        raise LogError(f"{path}: not a Flight Recorder dump (neither its pickle nor its JSON)")
    try:
        size = os.path.getsize(path)
        if size > MAX_DUMP:
            raise LogError(f"{path}: {size} bytes, larger than any Flight Recorder dump this reads ({MAX_DUMP})")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise LogError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        dump = _DataOnly(io.BytesIO(data)).load() if kind == "pickle" else json.loads(data)
    except _Refused as exc:
        raise LogError(f"{path}: not loaded: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - truncated or damaged: EOFError, ValueError, UnicodeDecodeError, ...
        raise LogError(f"{path}: a damaged or truncated Flight Recorder dump ({type(exc).__name__})") from None
    if not isinstance(dump, dict):
        raise LogError(f"{path}: not a Flight Recorder dump (a {type(dump).__name__}, not a map)")
    _check_version(path, dump.get("version"))
    entries = dump.get("entries", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise LogError(f"{path}: a damaged Flight Recorder dump (its entries are not a list of maps)")
    return dump


def _check_version(path: str, version) -> None:
    if not isinstance(version, str) or "." not in version:
        raise LogError(f"{path}: not a Flight Recorder dump (no version)")
    major = version.split(".", 1)[0]
    if not major.isdigit() or int(major) != SUPPORTED_MAJOR:
        raise LogError(f"{path}: Flight Recorder dump version {version} is not supported "
                       f"(this collcheck reads {SUPPORTED_MAJOR}.x)")
