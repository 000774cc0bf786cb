"""Dumps read in worker processes, as many at once as the machine has CPUs, with the C unpickler
(load.py): a worker that a dump's CPU-time limit ends takes only itself down.

Dumps are handed over a few at a time (`chunk_size`: handing one over costs a fraction of a
millisecond in the command's process, which shares the CPUs with the workers), at most two such
tasks per worker in flight, so that a worker's death leaves few whose fate is unknown: those are read again in this process with the Python unpickler (`fallback`), which
refuses what the C one could only be stopped in, or reads what a worker died of otherwise (the
kernel's out-of-memory killer); the rest go on in a new pool. What a worker raises (LogError: one
line) is raised here.

A worker keeps what it decoded (`keep`), up to KEEP_RSS of memory, and a pool's workers read
PER_POOL dumps each before they exit: a forked worker exits without freeing anything, where
freeing a decoded dump's objects one by one took a third of the time its decoding took.
"""

from __future__ import annotations

import faulthandler
import gc
import os
from collections.abc import Callable, Iterator

from .load import fast_decoding, limit_core_dumps

IN_FLIGHT = 2  # tasks handed to each worker at a time
CHUNK_MOST = 8  # dumps of one task, at most
PER_POOL = 128  # dumps per worker of one pool: then its workers exit, and a new pool goes on (a pool
# costs a fork per worker: a few ms, more for a large command process)
KEEP_RSS = 192 << 20  # bytes of memory up to which a worker keeps what it decoded

_kept: list | None = None  # in a worker: what it decoded, freed only by its exit


def pool_size(items: int, workers: int, least: int) -> int:
    """Worker processes for `items` dumps: none below `least` of them, or where the C unpickler
    cannot run under its limits or processes cannot be forked; else `workers` (at least one: the
    C unpickler runs only in a process that may die)."""
    if items < least or not fast_decoding() or not hasattr(os, "fork"):
        return 0
    return max(1, min(workers, items))


def keep(value) -> None:
    """In a worker, while it holds less than KEEP_RSS of memory: `value` is never freed (its exit
    frees nothing). Elsewhere: nothing (it is freed as usual)."""
    if _kept is not None and _rss() < KEEP_RSS:
        _kept.append(value)


def _rss() -> int:
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def chunk_size(items: int, workers: int) -> int:
    """Dumps per task: up to CHUNK_MOST, while every worker still gets 32 tasks or more (the last
    ones then end together)."""
    return max(1, min(CHUNK_MOST, items // (max(workers, 1) * 32)))


def run_all(fn: Callable, items: list, workers: int, fallback: Callable, chunk: int = 1) -> Iterator[tuple[int, object]]:
    """(index, fn(item)) for every item, in the order they complete, in `workers` forked processes
    that take `chunk` items a task (none: `fallback(item)` here, in order)."""
    if workers <= 0:
        for i, item in enumerate(items):
            yield i, fallback(item)
        return
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    numbered = list(enumerate(items))
    todo = [numbered[k:k + chunk] for k in range(0, len(numbered), chunk)][::-1]
    while todo:
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=_worker)
        running: dict = {}
        share = PER_POOL * workers
        try:
            while (todo and share > 0) or running:
                while todo and share > 0 and len(running) < IN_FLIGHT * workers:
                    part = todo.pop()
                    running[pool.submit(_each, fn, [item for _, item in part])] = part
                    share -= len(part)
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                    break
                for f in done:
                    part = running.pop(f)
                    yield from zip((i for i, _ in part), f.result())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        for i, item in sorted(pair for part in running.values() for pair in part):  # the pool broke: these, here
            yield i, fallback(item)


def _each(fn: Callable, items: list) -> list:
    return [fn(item) for item in items]


def _worker() -> None:
    """A worker's setup: no core file or fault report when a limit or a crash ends it, no garbage
    collection (a dump decodes into a million containers without a cycle among them: collecting
    finds nothing, and took as long as the rest of the work), and what it decodes kept."""
    global _kept
    limit_core_dumps()
    faulthandler.disable()  # (a dump that crashes its worker is one line of the command's, not a C stack)
    gc.disable()
    _kept = []
