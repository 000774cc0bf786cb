"""The state the recording kernels share, kept in the compiled kernels' module (fastpath.cpp).

The same methods as engine_python.PythonEngine (see there why one engine object), each bound
straight to the module's function: the records Python writes (a template's first use, API calls)
and those the C++ kernels write themselves draw their event ids, sequence numbers, bucket indices,
in-flight entries and live hashes from the one place. It also owns the callbacks the kernels call
back into (native/hooks.py) and hands them over when it attaches to a recorder.
"""

from __future__ import annotations

from .native.hooks import NativeHooks


class NativeEngine:
    """The compiled kernels' module seen as a recorder's engine."""

    compiled = True

    def __init__(self, module):
        self.module = module
        self.hooks: NativeHooks | None = None  # the attached recorder's callbacks (attach)
        for name in ("next_eid", "peek_eid", "next_seq", "seqs", "label_state", "mix", "live", "track", "forget",
                     "inflight", "take_done", "has_done", "poll", "set_enabled", "set_api", "set_epoch",
                     "set_polling"):
            setattr(self, name, getattr(module, name))  # no Python frame between the caller and C++

    def attach(self, rec) -> None:
        """Make `rec` the recorder the kernels report to: its callbacks, clock origin and writer."""
        module = self.module
        hooks = self.hooks = NativeHooks(rec, rec.completions, module)
        module.attach(hooks.issue, hooks.returned, hooks.label_sid, rec.fail, rec.t0, rec.writer)
        writer = rec.writer
        writer.colls_written = module.peek_eid  # (the LogWriter's counter) C records it wrote count too
        module.set_epoch(rec.backward_passes)
        module.set_enabled(bool(rec.active))

    def after_fork_in_child(self) -> None:
        """A forked child: the module forgets the parent's collectives and templates."""
        self.module.after_fork_in_child()
        if self.hooks is not None:
            self.hooks.after_fork_in_child()
