"""Every `COLLCHECK*` environment variable, read here and nowhere else (docs/recording.md for users).

The startup hook reads these in every Python process of the environment, so this module imports
only `os` (a dataclass would pull in `inspect` and `re`: milliseconds per process).
"""

from __future__ import annotations

import os

TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
FALSE_VALUES = frozenset({"0", "false", "no", "off"})
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "collcheck")


class Settings:
    """The settings of one process, from its environment (`from_env`), read once: the recorder keeps
    the object and never reads the environment per collective.

    =============================  ==================  ================  ==========================================
    variable                       field               default           meaning
    =============================  ==================  ================  ==========================================
    COLLCHECK                      enabled             off               a TRUE_VALUES value: record every process
                                                                         of the environment (capture/startup.py)
    COLLCHECK_DIR                  directory           collcheck-logs    root of the logs: <dir>/<run id>/
    COLLCHECK_RUN_ID               run_id, launch      none              the run's name; the outermost process
                                                                         exports a fresh one (`new_run_id`);
                                                                         `launch` keeps the exported value when code
                                                                         sets `run_id` (the header's "launch")
    COLLCHECK_STACK                full_stack          site              site | full: every frame, not only the user's
    COLLCHECK_HANG_SECONDS         hang_seconds        60                the watchdog dumps stacks after this; 0: off
    COLLCHECK_MAX_MB               max_mb              64                log cap per rank; 0: one unbounded file
    COLLCHECK_LIVE                 live                on                a TRUE_VALUES value: summaries and the live
                                                                         checker (capture/live/)
    COLLCHECK_LIVE_ACTION          live_action         report            report | abort: end the job at a finding
    COLLCHECK_LIVE_INTERVAL        live_interval       0.5 (>= 0.05)     seconds between two summaries of a rank
    COLLCHECK_LIVE_HANG_SECONDS    live_hang_seconds   1.5 (>= 0.1)      no progress this long: a hang is suspected
    COLLCHECK_COMPLETION           completion          auto              auto: poll is_completed() of the Works of
                                                                         backends whose futures complete at enqueue
                                                                         (NCCL, simnccl); poll: of every backend
    COLLCHECK_POLL_MS              poll_ms             5 (0.5-1000)      milliseconds between two polling rounds
    COLLCHECK_FASTPATH             fastpath            auto              FALSE_VALUES: off; TRUE_VALUES: on, and say
                                                                         on stderr which path each process uses
    COLLCHECK_SIMNCCL              simnccl             off               a TRUE_VALUES value: groups are made on the
                                                                         simulated NCCL backend (capture/use_simnccl)
    COLLCHECK_BUILD_VERBOSE        build_verbose       off               exactly "1": the fast path's build shows the
                                                                         compiler's output
    COLLCHECK_DEBUG                debug               off               any non-empty value: an internal error is
                                                                         re-raised for its traceback (base/errors.py)
    COLLCHECK_WORKERS              workers             0: one per CPU    processes that read the logs of a run
    COLLCHECK_SCENARIOS            scenarios           none              where `collcheck demo` finds its scenarios
    COLLCHECK_CACHE                cache_dir           ~/.cache/         what lint learned of installed packages, the
                                                       collcheck         compiled readers; empty: nothing cached
    COLLCHECK_READER               reader              auto              auto: logs and Flight Recorder dumps are read
                                                                         by compiled loops where a C compiler built them
                                                                         (logfile/compiled.py, inputs/flight_recorder/
                                                                         compiled.py); python: by Python only
    =============================  ==================  ================  ==========================================

    A value that cannot be used leaves its field at the default and is named in `invalid`, so that
    reading the settings never fails (the startup hook, the error path read them); recording refuses
    to start on one (`check`), as does the command that uses `COLLCHECK_WORKERS`.
    """

    RECORDING = ("COLLCHECK_STACK", "COLLCHECK_LIVE_ACTION", "COLLCHECK_HANG_SECONDS", "COLLCHECK_MAX_MB",
                 "COLLCHECK_LIVE_INTERVAL", "COLLCHECK_LIVE_HANG_SECONDS", "COLLCHECK_COMPLETION",
                 "COLLCHECK_POLL_MS")  # those `check` looks at by default

    def __init__(self, *, enabled: bool = False, directory: str = "collcheck-logs", run_id: str | None = None,
                 launch: str = "", full_stack: bool = False, hang_seconds: float = 60.0, max_mb: float = 64.0,
                 live: bool = True, live_action: str = "report", live_interval: float = 0.5,
                 live_hang_seconds: float = 1.5, completion: str = "auto", poll_ms: float = 5.0,
                 fastpath: str = "auto", simnccl: bool = False,
                 build_verbose: bool = False, debug: bool = False, workers: int = 0, scenarios: str | None = None,
                 cache_dir: str | None = DEFAULT_CACHE, reader: str = "auto",
                 invalid: dict[str, str] | None = None) -> None:
        self.enabled = enabled
        self.directory = directory
        self.run_id = run_id
        self.launch = launch
        self.full_stack = full_stack
        self.hang_seconds = hang_seconds
        self.max_mb = max_mb
        self.live = live
        self.live_action = live_action
        self.live_interval = live_interval
        self.live_hang_seconds = live_hang_seconds
        self.completion = completion
        self.poll_ms = poll_ms
        self.fastpath = fastpath
        self.simnccl = simnccl
        self.build_verbose = build_verbose
        self.debug = debug
        self.workers = workers
        self.scenarios = scenarios
        self.cache_dir = cache_dir
        self.reader = reader
        self.invalid = dict(invalid or {})  # variable -> why its value cannot be used

    @classmethod
    def from_env(cls, environ=os.environ) -> Settings:
        """The settings `environ` holds; never raises (see `invalid`)."""
        invalid: dict[str, str] = {}
        stack = _choice(environ, "COLLCHECK_STACK", ("site", "full"), invalid)
        run_id = environ.get("COLLCHECK_RUN_ID", "")
        fastpath = environ.get("COLLCHECK_FASTPATH", "").strip().lower()
        return cls(
            enabled=_flag(environ, "COLLCHECK", False),
            directory=environ.get("COLLCHECK_DIR", "collcheck-logs"),
            run_id=run_id or None,
            launch=run_id,
            full_stack=stack == "full",
            live_action=_choice(environ, "COLLCHECK_LIVE_ACTION", ("report", "abort"), invalid),
            hang_seconds=_number(environ, "COLLCHECK_HANG_SECONDS", 60.0, invalid),
            max_mb=_number(environ, "COLLCHECK_MAX_MB", 64.0, invalid),
            live=_flag(environ, "COLLCHECK_LIVE", True),
            live_interval=max(0.05, _number(environ, "COLLCHECK_LIVE_INTERVAL", 0.5, invalid)),
            live_hang_seconds=max(0.1, _number(environ, "COLLCHECK_LIVE_HANG_SECONDS", 1.5, invalid)),
            completion=_choice(environ, "COLLCHECK_COMPLETION", ("auto", "poll"), invalid),
            poll_ms=min(1000.0, max(0.5, _number(environ, "COLLCHECK_POLL_MS", 5.0, invalid))),
            fastpath="off" if fastpath in FALSE_VALUES else "on" if fastpath in TRUE_VALUES else "auto",
            simnccl=_flag(environ, "COLLCHECK_SIMNCCL", False),
            build_verbose=environ.get("COLLCHECK_BUILD_VERBOSE") == "1",
            debug=bool(environ.get("COLLCHECK_DEBUG")),
            workers=_number(environ, "COLLCHECK_WORKERS", 0, invalid, int),
            scenarios=environ.get("COLLCHECK_SCENARIOS") or None,
            cache_dir=_cache_dir(environ),
            reader=_choice(environ, "COLLCHECK_READER", ("auto", "python"), invalid),
            invalid=invalid,
        )

    def check(self, *variables: str) -> Settings:
        """`self`, or ValueError for the first of `variables` (default: those recording uses) whose
        value cannot be used."""
        for name in variables or self.RECORDING:
            if name in self.invalid:
                raise ValueError(self.invalid[name])
        return self

    def resolved_run_id(self, environ=os.environ) -> str:
        """Same for every rank of one launch: torchrun's rdzv id, else the id that the
        outermost COLLCHECK process (torchrun's agent, `collcheck record`) exported."""
        return _elastic_run_id(environ) or self.run_id or f"ppid{os.getppid()}"

    def named_by_each_rank(self, environ=os.environ) -> bool:
        """No launcher named the run for all its ranks (no torchrun rendezvous id, no
        COLLCHECK_RUN_ID from a parent or the user): this process named it (or its parent's pid
        does), and so did every other rank, each its own way."""
        if _elastic_run_id(environ):
            return False
        return self.run_id is None or named_here(self.run_id)


def _elastic_run_id(environ) -> str | None:
    """torchrun's rendezvous id, the same for every rank of its launch ("none": not given)."""
    elastic = environ.get("TORCHELASTIC_RUN_ID")
    return elastic if elastic and elastic != "none" else None


def new_run_id() -> str:
    import socket
    import time

    return time.strftime("%Y%m%d-%H%M%S") + f"-{socket.gethostname()}-{os.getpid()}"


def named_here(run_id: str | None) -> bool:
    """Whether this process named the run itself (new_run_id ends with its host and pid), as the
    outermost process under COLLCHECK=1 does: ranks launched apart (srun, mpirun, a shell each)
    each name it so (capture/session.py then agrees on one name through the job's store)."""
    import socket

    return bool(run_id) and run_id.endswith(f"-{socket.gethostname()}-{os.getpid()}")


def safe_run_id(text: str) -> bool:
    """A run's name that is safe as a directory name: letters, digits, '.', '_', '-', not a dot first."""
    import re

    return re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}", text) is not None


def _cache_dir(environ) -> str | None:
    """COLLCHECK_CACHE, else ~/.cache/collcheck; "" turns caching off."""
    text = environ.get("COLLCHECK_CACHE")
    return DEFAULT_CACHE if text is None else text or None


def _flag(environ, name: str, default: bool) -> bool:
    text = environ.get(name)
    return default if text is None else text.strip().lower() in TRUE_VALUES


def _choice(environ, name: str, choices: tuple[str, ...], invalid: dict) -> str:
    value = environ.get(name, choices[0]).strip().lower()
    if value in choices:
        return value
    invalid[name] = f"{name} must be {' or '.join(repr(c) for c in choices)}, not {value!r}"
    return choices[0]


def _number(environ, name: str, default, invalid: dict, kind=float):
    text = environ.get(name)
    if text is None:
        return default
    try:
        return kind(text)
    except ValueError as exc:
        invalid[name] = str(exc)  # (float's own words, as when recording refused it before)
        return default
