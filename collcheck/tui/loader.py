"""The TUI's loader process: a big run is read and analysed away from the interface's GIL.

The process (a fresh interpreter: none of the interface's threads, nothing forked from them) sends
over a pipe, in this order: progress lines; for a big run, a partial first screen (the timelines'
first page of the first FIRST_LOGS logs, unjudged: no verdict, no cell saying whether ranks agree)
as soon as those are read; the first screen (the summary line's facts, the overview and wait-for
panes, the timelines' first page), then what the interface needs to build the rest without
reading every log's end again (each log's header and last checkpoint, in parts), then "done"; or
one "error" line (the run cannot be read: the command's one line and exit 2).

Only plain data crosses (logfile/wire.py: msgpack of builtins, never pickle), so nothing from the
logs can run code on either side. The process writes nothing to the terminal (its stderr goes
to /dev/null): the interface alone says what happened, its death included."""

from __future__ import annotations

import os
import time

from ..logfile import wire

__all__ = ["LoaderDied", "LoaderProcess", "known_summaries", "main", "plain_summaries", "serve"]

HOLD_S = 60  # the longest a test's hold keeps the process after a first screen
SUMMARIES = 1024  # logs' summaries per message
FIRST_LOGS = 256  # logs read for the partial first screen: the first ranks, more than a screen's columns
STREAM_FROM = 4 * FIRST_LOGS  # logs from which the partial first screen is sent before the whole run's


class LoaderDied(Exception):
    """The loader process ended without saying it was done (killed, out of memory)."""

    def __init__(self, exitcode: int | None):
        how = (f"killed by signal {-exitcode}" if exitcode is not None and exitcode < 0
               else f"exit code {exitcode}" if exitcode is not None else "no exit code")
        super().__init__(f"the process loading the run died ({how}) before it was done")


# -- the parent's end -------------------------------------------------------------------------
class LoaderProcess:
    """The loader process of one source, started at once; `messages()` yields (kind, payload).

    A fresh interpreter (`python -m collcheck.tui.loader`, this tree's collcheck first on its
    path): it shares nothing with the interface, its threads or its terminal. The source goes to
    its stdin, the messages come back on its stdout (logfile/wire.py)."""

    def __init__(self, source, hold: str | None = None, stream: tuple | None = None):
        import subprocess
        import sys

        spec = {"kind": source.kind, "path": source.path, "found": list(source.found), "logs": list(source.logs),
                "headers": source.headers, "hold": hold, "stream": list(stream) if stream else None}
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.process = subprocess.Popen([sys.executable, "-m", "collcheck.tui.loader"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.pid = self.process.pid
        self.closed = False
        self._messages = wire.Receiver(self.process.stdout.fileno(), lambda: self.process.poll() is None)
        try:
            self.process.stdin.write(wire.pack(spec))
            self.process.stdin.close()
        except OSError:  # (it died at once: messages() says so)
            pass

    def messages(self):
        """(kind, payload) until "done" or "error"; LoaderDied when the pipe ends before."""
        while True:
            try:
                kind, payload = self._messages.receive()
            except (EOFError, OSError, ValueError):
                raise LoaderDied(self._exitcode()) from None
            yield kind, payload
            if kind in ("done", "error"):
                return

    def _exitcode(self) -> int | None:
        try:
            return self.process.wait(5)
        except Exception:  # noqa: BLE001 - (still running: killed by close())
            return None

    def close(self) -> None:
        """Ends the process if it still runs (the app quit before it was done)."""
        self.closed = True  # (its end is then no death to tell)
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(5)
        except Exception:  # noqa: BLE001 - (a process that does not die: left to the system)
            pass
        self.process.stdout.close()


def known_summaries(payload: dict) -> dict:
    """path -> (header, Tail or None): what load_run(known=...) takes, from the summaries sent."""
    from ..logfile.tail import Tail

    headers, tails = wire.unpack(payload["headers"]), wire.unpack(payload["tails"])
    return {str(p): (h, Tail(t[0], t[1], bool(t[2])) if t is not None else None)
            for p, h, t in zip(payload["paths"], headers, tails)}


def plain_summaries(known: dict) -> dict:
    """The summaries load_run read (`known`), as builtins."""
    paths = list(known)
    return {"paths": paths,
            "headers": wire.pack([known[p][0] for p in paths]),
            "tails": wire.pack([None if t is None else [t.checkpoint, t.after, t.complete]
                                for t in (known[p][1] for p in paths)])}


# -- the process's end --------------------------------------------------------------------------
class _Pipe:
    """The process's end of the pipe (logfile/wire.py's messages)."""

    def __init__(self, fd: int):
        self.fd = fd

    def send(self, kind: str, payload=None) -> None:
        wire.send(self.fd, [kind, payload])

    def close(self) -> None:
        os.close(self.fd)


class _Sent:
    """base/progress's display in the process: a line to the interface at most every 0.25 s."""

    def __init__(self, conn):
        self.conn, self.what, self.total, self.done, self.at = conn, "", 0, 0, 0.0

    def start(self, what: str, total: int) -> None:
        self.what, self.total, self.done = what, total, 0

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.at >= 0.25:
            self.at = now
            self.conn.send("progress", f"{self.what}: {self.done:,} of {self.total:,}")

    def finish(self) -> None:
        pass


def main() -> None:
    """`python -m collcheck.tui.loader`: the source on stdin, the messages on stdout (which
    nothing else writes to: print goes to /dev/null)."""
    import sys

    spec = wire.unpack(sys.stdin.buffer.read())
    conn = _Pipe(os.dup(1))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    serve(spec, conn)


def serve(spec: dict, conn) -> None:
    """The process: load, analyse, send (module docstring); never a traceback on the terminal.
    The cycle collector is paused throughout (base/collector.py): the run's objects live until the
    process ends, and walking them again and again would double the grid's time."""
    from ..base import collector
    from ..logfile.reader import LogError

    try:
        with collector.paused():
            _serve(spec, conn)
    except LogError as exc:
        conn.send("error", str(exc))
    except Exception as exc:  # noqa: BLE001 - said like the CLI's internal error
        conn.send("error", f"internal error: {type(exc).__name__}: {exc}")
    finally:
        conn.close()


def _serve(spec: dict, conn) -> None:
    from ..base import progress
    from ..base.untrusted import one_line
    from ..inputs.discover import Source
    from ..model import load_run

    source = Source(spec["kind"], spec["path"], list(spec["found"]))
    source._logs, source.headers = list(spec["logs"]), list(spec["headers"]) if spec["headers"] else None
    progress.use(_Sent(conn))
    conn.send("progress", f"reading the logs of {one_line(source.path or '')} ...")
    known: dict = {}
    first_logs, stream_from = spec.get("stream") or (FIRST_LOGS, STREAM_FROM)
    if len(source.logs) >= stream_from:
        _send_partial(source, conn, known, int(first_logs))
        _hold(spec.get("hold"))
    run = load_run(source, known=known)  # (unstreamed, before the analysis is imported: a bad run said sooner)
    conn.send("progress", f"analysing {len(run.ranks)} ranks ...")
    conn.send("first", _first_screen(run))
    _hold(spec.get("hold"))
    paths = list(known)
    for k in range(0, len(paths), SUMMARIES):  # (in parts: the interface decodes each between its keys)
        conn.send("summaries", plain_summaries({p: known[p] for p in paths[k:k + SUMMARIES]}))
    conn.send("done")


def _first_screen(run) -> dict:
    """The summary line's facts, the overview and wait-for panes, the timelines' first page."""
    from ..analysis.diff import analyse
    from . import navigation
    from .grid import Grid
    from .page import first_page
    from .plain import summary_facts, to_plain
    from .widgets import panes

    report = analyse(run)
    group = navigation.default_group(report, navigation.MERGED)
    grid = Grid(report, None if group == navigation.MERGED else group)
    marks, culprits = navigation.marks(report, grid, -1)
    return {"facts": summary_facts(report), "overview": to_plain(panes.overview(report)),
            "waitfor": to_plain(panes.waitfor(report)), "page": first_page(report, grid, marks, culprits)}


def _send_partial(source, conn, known: dict, first_logs: int = FIRST_LOGS) -> None:
    """The partial first screen: the first `first_logs` logs loaded and laid out (their summaries
    kept in `known`, not read again), sent unjudged with no verdict: the others may disagree."""
    from ..analysis.diff import analyse
    from ..inputs.discover import Source
    from ..logfile.reader import LogError
    from ..model import load_run
    from . import navigation
    from .grid import Grid
    from .page import first_page

    paths = source.logs
    part = Source(source.kind, source.path, list(source.found))
    part._logs, part.headers = paths[:first_logs], source.headers[:first_logs] if source.headers else None
    try:
        report = analyse(load_run(part, known=known))
    except LogError:
        return  # (the whole run's load says it)
    group = navigation.default_group(report, navigation.MERGED)
    grid = Grid(report, None if group == navigation.MERGED else group)
    facts = {"name": os.path.basename(os.path.normpath(report.run.directory)), "ranks": len(paths),
             "verdict": None, "findings": None, "running": []}
    conn.send("first", {"partial": {"read": len(part.logs), "total": len(paths)}, "facts": facts,
                        "page": first_page(report, grid, {}, {}, judged=False)})


def _hold(path: str | None) -> None:
    """Tests: wait after the first screen until `path` exists (the interface is looked at meanwhile)."""
    end = time.monotonic() + HOLD_S
    while path and not os.path.exists(path) and time.monotonic() < end:
        time.sleep(0.02)


if __name__ == "__main__":
    main()
