"""The property every recorded run must have: a collective speaks the language of the framework that
issued it, told from its full stack (COLLCHECK_STACK=full), not from the label under test.

- FSDP (torch/distributed/fsdp/), DTensor / tensor parallel (torch/distributed/tensor/),
  pipelining (torch/distributed/pipelining/) and distributed checkpoint
  (torch/distributed/checkpoint/) collectives are never labelled DDP or join().
- DDP's collectives (torch/nn/parallel/distributed.py on the stack, or issued from C++ below a
  backward pass with no other framework on the stack: the reducer's buckets) are labelled DDP's
  (a DDP phase, join(), or DDP's own checks and broadcasts), never another framework's.
"""

from __future__ import annotations

from collcheck.knowledge.torch_internals import ddp

FRAMEWORK_DIRS = {"FSDP": "torch/distributed/fsdp/", "DTensor": "torch/distributed/tensor/",
                  "pipelining": "torch/distributed/pipelining/", "checkpoint": "torch/distributed/checkpoint/"}
DDP_FILE = "torch/nn/parallel/distributed.py"
DDP_WORDS = ("DDP", "join()", "ZeRO join()")
DDP_ROLES = frozenset(ddp.ROLES.values()) | {"bucket rebuild", "gradient bucket"}  # labels without a phase


def issuers(e) -> set[str]:
    files = [f[0].replace("\\", "/") for f in e.stack or () if f is not None]
    found = {name for name, d in FRAMEWORK_DIRS.items() if any(d in f for f in files)}
    if any(f.endswith(DDP_FILE) for f in files) or (e.native and not found and any("torch/autograd/" in f for f in files)):
        found.add("DDP")
    return found


def assert_labels_speak_their_framework(run) -> int:
    """Check every event of `run` (recorded with full stacks); returns how many were checked."""
    checked = 0
    for rank, log in run.ranks.items():
        for i in range(len(log)):
            e = log.event(i)
            assert e.stack, f"rank {rank} event {i}: no full stack recorded (record with COLLCHECK_STACK=full)"
            who = issuers(e)
            label = e.label or ""
            if who and who <= set(FRAMEWORK_DIRS):
                assert not any(w in label for w in DDP_WORDS), (rank, i, who, label, e.stack)
                checked += 1
            elif who == {"DDP"}:
                assert label.startswith(DDP_WORDS) or label.rstrip(" 0123456789") in DDP_ROLES, (rank, i, label, e.stack)
                assert not any(name in label for name in ("FSDP", "DTensor", "pipeline", "checkpoint")), (rank, i, label)
                checked += 1
    return checked
