"""The poller: a thread that sees collectives complete where the backend's future cannot say so.

NCCL marks a Work's future complete when the collective is enqueued on its stream; only
`Work.is_completed()` (the kernel's end event) says it ran. The recorder keeps such Works
(completions.py) and this thread asks them every COLLCHECK_POLL_MS, in rounds of at most
POLL_BATCH, off the job's threads: the collective's own call costs nothing more. Completions it
sees are written out at once (the in-flight table the watchdog and live mode read then drops them).
It starts when the first polled group appears and then wakes every interval, whether or not a
Work is kept (the compiled path keeps them without telling Python): a round with nothing to ask
costs a few microseconds.
"""

from __future__ import annotations

import threading

IDLE_S = 0.2  # recording paused: how often to look again


class Poller(threading.Thread):
    def __init__(self, current, interval_s: float):
        super().__init__(name="collcheck-poller", daemon=True)
        self.current = current  # () -> the live Recorder or None
        self.interval_s = interval_s
        self.stop = threading.Event()

    def run(self) -> None:
        pause = self.interval_s
        while not self.stop.wait(pause):
            rec = self.current()
            if rec is None or rec.writer is None or not rec.active:
                pause = IDLE_S
                continue
            pause = self.interval_s
            try:
                rec.poll_completions()
            except Exception as exc:  # never let the thread die loudly inside the job
                rec.fail(exc)
                return
