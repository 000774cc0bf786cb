"""Is the process that writes a log still running? Then its log is a snapshot, not an ending."""

from __future__ import annotations

import os
import socket

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_alive(header: dict) -> bool:
    """The log's process (header host and pid) runs on this host and is the one that wrote the log:
    a pid reused since then started after the log's header (Linux /proc); other hosts: unknown, no."""
    pid = header.get("pid")
    if not isinstance(pid, int) or pid <= 0 or header.get("host") != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: alive
    except OSError:
        return False
    started = _start_wall_s(pid)
    wall = header.get("wall_ns")
    if started is not None and isinstance(wall, int) and started > wall / 1e9 + 1:
        return False  # the pid was reused
    return not _zombie(pid)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3


def _zombie(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[0] in ("Z", "X")


def _start_wall_s(pid: int) -> float | None:
    """When the process started (seconds since the epoch), from /proc; None elsewhere."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    try:
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + int(fields[19]) / _CLOCK_TICKS
    except (OSError, StopIteration, ValueError, IndexError):
        return None
