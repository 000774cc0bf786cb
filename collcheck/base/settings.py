"""Recording settings, read from the environment (documented in docs/recording.md)."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass

TRUE = {"1", "true", "yes", "on"}


def env_enabled(environ=os.environ) -> bool:
    return environ.get("COLLCHECK", "").strip().lower() in TRUE


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{socket.gethostname()}-{os.getpid()}"


@dataclass
class Config:
    directory: str = "collcheck-logs"
    full_stack: bool = False  # COLLCHECK_STACK=full: every frame, not only the user's
    hang_seconds: float = 60.0  # COLLCHECK_HANG_SECONDS: watchdog dumps stacks after this
    run_id: str | None = None
    max_mb: float = 64.0  # COLLCHECK_MAX_MB: per rank; 0 = one unbounded file
    live: bool = True  # COLLCHECK_LIVE=0: no summaries published, no live checker (live.py)
    live_action: str = "report"  # COLLCHECK_LIVE_ACTION: report | abort (end the job at a finding)
    live_interval: float = 0.5  # COLLCHECK_LIVE_INTERVAL: seconds between two summaries of a rank
    live_hang_seconds: float = 1.5  # COLLCHECK_LIVE_HANG_SECONDS: no progress this long = a hang

    @classmethod
    def from_env(cls, environ=os.environ) -> "Config":
        stack = environ.get("COLLCHECK_STACK", "site").strip().lower()
        if stack not in ("site", "full"):
            raise ValueError(f"COLLCHECK_STACK must be 'site' or 'full', not {stack!r}")
        action = environ.get("COLLCHECK_LIVE_ACTION", "report").strip().lower()
        if action not in ("report", "abort"):
            raise ValueError(f"COLLCHECK_LIVE_ACTION must be 'report' or 'abort', not {action!r}")
        return cls(
            directory=environ.get("COLLCHECK_DIR", "collcheck-logs"),
            full_stack=stack == "full",
            hang_seconds=float(environ.get("COLLCHECK_HANG_SECONDS", "60")),
            run_id=environ.get("COLLCHECK_RUN_ID") or None,
            max_mb=float(environ.get("COLLCHECK_MAX_MB", "64")),
            live=environ.get("COLLCHECK_LIVE", "1").strip().lower() in TRUE,
            live_action=action,
            live_interval=max(0.05, float(environ.get("COLLCHECK_LIVE_INTERVAL", "0.5"))),
            live_hang_seconds=max(0.1, float(environ.get("COLLCHECK_LIVE_HANG_SECONDS", "1.5"))),
        )

    def resolved_run_id(self, environ=os.environ) -> str:
        """Same for every rank of one launch: torchrun's rdzv id, else the id that the
        outermost COLLCHECK process (torchrun's agent, `collcheck record`) exported."""
        elastic = environ.get("TORCHELASTIC_RUN_ID")
        if elastic and elastic != "none":
            return elastic
        return self.run_id or environ.get("COLLCHECK_RUN_ID") or f"ppid{os.getppid()}"
