"""Training loops written as real Python files, with one rank-dependent branch, and the logs the
recorder would write of them (tests of blame from the program's source).

A program (`Program`) is a loop `for step in range(STEPS):` in `main()` that calls a chain of
helpers 1-4 deep; each level issues plain torch.distributed collectives, and one level holds a
condition that lets one rank in (`if rank == K:`, `if dist.get_rank() == K:`, `if is_main:`,
`if rank != 0:` on two ranks...), around extra collectives or an early `break` / `return`.

What each rank issues is read from the file itself: `issued` runs the program once per rank with
a `torch` whose collectives only write down the call and its frames in the file (no process
group, no tensor); `write_run` then writes each rank's log with the recorder's LogWriter
(support/runs.py), as a gloo job records them: the ranks pair their calls slot by slot until the
first slot whose calls differ, where they all block until the job is killed or its timeout
raises.
"""

from __future__ import annotations

import builtins
import os
import sys
import types
from dataclasses import dataclass, field, replace

from support.runs import Call, write

# op -> (the recorded wire op, the call's source with {n}: its tensor's size)
OPS = {
    "all_reduce": ("allreduce_", "dist.all_reduce(torch.zeros({n}))"),
    "broadcast": ("broadcast_", "dist.broadcast(torch.zeros({n}), src=0)"),
    "reduce": ("reduce_", "dist.reduce(torch.zeros({n}), dst=0)"),
    "all_gather": ("_allgather_base_", "dist.all_gather_into_tensor(torch.zeros({n} * dist.get_world_size()), "
                                       "torch.zeros({n}))"),
    "barrier": ("barrier", "dist.barrier()"),
}
HELPERS = ("train_step", "sync_grads", "update", "log_metrics")  # the chain's levels 1-4
EXTRA_HELPER = "report"  # the function an extra collective may be issued from
ENTER_FORMS = ("rank", "get_rank", "local", "last", "is_main", "not_zero", "not_main")
SIZES = (1, 3, 4, 8, 16)


@dataclass
class Program:
    """One generated program. `levels[i]`: the calls of level i (0: the loop's body in main,
    1..depth: the helpers), split around the call of the next level. The branch sits at level
    `at`, before its statement `pos`; `form` says how its condition tests the rank, `steps` how
    it tests the step; `extras`: its collectives ((op, size, through a helper)), or none for an
    early exit."""

    world: int
    culprit: int
    depth: int
    levels: list  # [(calls before the next level, calls after it)], calls: [(op, size)]
    at: int
    pos: int
    form: str
    steps: tuple  # (how, S): "every" step, "and" step == S, "and_first" step >= S, "nested" `if step == S:` around
    extras: list = field(default_factory=list)
    loop: int = 4
    final: tuple = ("barrier", 0)
    # filled by render(): what the branch looks like in the file
    cond_line: int = 0
    cond_text: str = ""
    extra_lines: set = field(default_factory=set)  # the lines of the extra collectives' calls

    @property
    def exits(self) -> bool:
        return not self.extras

    def statements(self, level: int) -> list:
        before, after = self.levels[level]
        nested = [("nested",)] if level < self.depth else []
        return [("call", *c) for c in before] + nested + [("call", *c) for c in after]


def _call(op: str, n: int) -> str:
    return OPS[op][1].format(n=n)


def _rank_test(p: Program) -> str:
    k = p.culprit
    return {"rank": f"rank == {k}", "get_rank": f"dist.get_rank() == {k}", "local": f"me == {k}",
            "last": "dist.get_rank() == dist.get_world_size() - 1", "is_main": "is_main",
            "not_zero": f"rank != {1 - k}", "not_main": "not is_main"}[p.form]


def _condition(p: Program) -> list[str]:
    """The branch's header lines (the last one: the rank test, the condition a finding quotes)."""
    test = _rank_test(p)
    how, s = p.steps
    if how == "and":
        return [f"if {test} and step == {s}:"]
    if how == "and_first":
        return [f"if step >= {s} and {test}:"]
    if how == "nested":
        return [f"if step == {s}:", f"    if {test}:"]
    return [f"if {test}:"]


def render(p: Program) -> str:
    """The program's source; sets p.cond_line, p.cond_text and p.extra_lines."""
    lines = ['"""A generated training loop: one rank takes a branch."""', "import torch",
             "import torch.distributed as dist", "", ""]
    p.extra_lines = set()
    if any(via for _, _, via in p.extras):
        lines.append(f"def {EXTRA_HELPER}(step):")
        for op, n, via in p.extras:
            if via:
                lines.append(f"    {_call(op, n)}")
                p.extra_lines.add(len(lines))
        lines += ["", ""]

    def body(level: int, indent: str) -> list[str]:
        out = []
        statements = p.statements(level)
        for i in range(len(statements) + 1):
            if level == p.at and i == p.pos:
                out += _branch(p, level, indent, len(lines) + len(out))
            if i == len(statements):
                break
            s = statements[i]
            out.append(indent + (_call(s[1], s[2]) if s[0] == "call" else f"{HELPERS[level]}(step, rank, is_main)"))
        return out

    for level in range(p.depth, 0, -1):  # the deepest helper first: each is defined before its caller
        lines.append(f"def {HELPERS[level - 1]}(step, rank, is_main):")
        if p.at == level and p.form == "local":
            lines.append("    me = dist.get_rank()")
        lines += body(level, "    ")
        lines += ["", ""]
    lines += ["def main():", '    dist.init_process_group("gloo")', "    rank = dist.get_rank()",
              "    is_main = rank == 0"]
    if p.at == 0 and p.form == "local":
        lines.append("    me = dist.get_rank()")
    lines.append(f"    for step in range({p.loop}):")
    lines += body(0, "        ")
    lines += [f"    {_call(*p.final)}", "    dist.destroy_process_group()", "", "", 'if __name__ == "__main__":',
              "    main()", ""]
    return "\n".join(lines)


def _branch(p: Program, level: int, indent: str, start: int) -> list[str]:
    """The branch's lines, starting at line start + 1."""
    header = _condition(p)
    inner = indent + "    " * len(header)
    if p.exits:
        inside = [inner + ("break" if level == 0 else "return")]
    else:  # the extras in order; those issued through the helper by one call of it, where the first is
        inside, helper = [], False
        for op, n, via in p.extras:
            if not via:
                inside.append(inner + _call(op, n))
                p.extra_lines.add(start + len(header) + len(inside))
            elif not helper:
                inside.append(inner + f"{EXTRA_HELPER}(step)")
                helper = True
    p.cond_line = start + len(header)
    p.cond_text = header[-1].strip()
    return [indent + h for h in header] + inside


# -- what each rank issues: the program run with collectives that only write themselves down ----------

class _Tensor:
    def __init__(self, n: int):
        self.n = n


def _torch(path: str, rank: int, world: int, calls: list) -> types.SimpleNamespace:
    def issue(op: str, tensor=None, root=None, reduce=False):
        frames, f = [], sys._getframe(1)
        while f is not None:
            if f.f_code.co_filename == path:
                frames.append((path, f.f_lineno, f.f_code.co_name))
            f = f.f_back
        (_, line, func), outer = frames[0], tuple(reversed(frames[1:]))
        calls.append(Call(OPS[op][0], size=0 if tensor is None else tensor.n, line=line, func=func, file=path,
                          outer=outer, peer=root, reduce_op=0 if reduce else None))

    dist = types.SimpleNamespace(
        init_process_group=lambda *a, **k: None, destroy_process_group=lambda: None,
        get_rank=lambda: rank, get_world_size=lambda: world,
        all_reduce=lambda t, **k: issue("all_reduce", t, reduce=True),
        broadcast=lambda t, src, **k: issue("broadcast", t, root=src),
        reduce=lambda t, dst, **k: issue("reduce", t, root=dst, reduce=True),
        all_gather_into_tensor=lambda out, t, **k: issue("all_gather", t),
        barrier=lambda **k: issue("barrier"))
    return types.SimpleNamespace(zeros=_Tensor, distributed=dist)


def issued(path: str, rank: int, world: int) -> list[Call]:
    """The collectives the program at `path` issues on `rank`, in order, each with its frames in
    the file (innermost: the call site; outer: the callers, outermost first, `<module>` included)."""
    calls: list[Call] = []
    fake = _torch(path, rank, world, calls)

    def imports(name, globals=None, locals=None, fromlist=(), level=0):
        if name.split(".")[0] == "torch":
            return fake
        return builtins.__import__(name, globals, locals, fromlist, level)

    with open(path) as f:
        code = compile(f.read(), path, "exec")
    exec(code, {"__name__": "__main__", "__file__": path, "__builtins__": {**vars(builtins), "__import__": imports}})
    return calls


def signature(c: Call) -> tuple:
    return c.op, c.size, c.peer, c.reduce_op


def divergence(ranks: dict[int, list[Call]]) -> int | None:
    """The first slot where the ranks' calls differ in signature (gloo pairs equal ones silently)
    or one has none; None when they all issue the same calls."""
    n = max(len(c) for c in ranks.values())
    for k in range(n):
        here = {signature(c[k]) if k < len(c) else None for c in ranks.values()}
        if len(here) > 1:
            return k
    return None


def write_run(directory: str, path: str, world: int, ending: str = "killed"):
    """Each rank's log of the program at `path` as a gloo job records it: the calls up to the first
    slot that differs, where every rank blocks (its call there never completes); then the job is
    killed there (`killed`) or its timeout raises on every rank (`raised`: they exit through the
    exception, hashing the program's files as the recorder does at exit). A rank with no call at
    that slot exits cleanly. Returns (the loaded Run, the slot)."""
    ranks = {r: issued(path, r, world) for r in range(world)}
    k = divergence(ranks)
    assert k is not None, "the program's ranks issue the same calls"
    logged = {r: [replace(c, done=i < k) for i, c in enumerate(calls[:k + 1])] for r, calls in ranks.items()}
    blocked = [r for r, calls in ranks.items() if len(calls) > k]
    done = [r for r in ranks if r not in blocked]
    raised = {r: "[gloo] Timed out waiting 6000ms for recv operation to complete" for r in blocked} \
        if ending == "raised" else {}
    return write(directory, {"0": tuple(range(world))}, logged, finished=done, raised=raised), k


def save(directory: str, p: Program, mirrors: list | None = None) -> str:
    """The program rendered into directory/train.py; its path. `mirrors[i]`: "call" makes extra i
    the same call as the common one the culprit issues right after the extras (gloo pairs them
    silently), "op" the same op with another size, None leaves it as drawn."""
    path = os.path.join(directory, "train.py")
    with open(path, "w") as f:
        f.write(render(p))
    if not any(mirrors or ()):
        return path
    calls = issued(path, p.culprit, p.world)
    first = next(i for i, c in enumerate(calls) if c.line in p.extra_lines)
    after = next(c for c in calls[first:] if c.line not in p.extra_lines)
    op = next(name for name, (wire, _) in OPS.items() if wire == after.op)
    other = 0 if op == "barrier" else next(n for n in SIZES if n != after.size)
    p.extras = [(op, after.size if m == "call" else other, via) if m else (o, n, via)
                for (o, n, via), m in zip(p.extras, mirrors)]
    return save(directory, p)
