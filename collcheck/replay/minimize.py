"""Delta debugging over a plan's collectives, and standalone repro scripts.

Units of deletion: one collective slot of a group (the k-th collective of group G on
every rank that has one) or one point-to-point message (the k-th of a (group, src, dst)),
so a deletion never unbalances ranks that agreed. A candidate is kept when its replay's
first finding has the same kind, group, culprit ranks and culprit call sites as the
target; positions may change (deleting earlier slots renumbers them).
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import tempfile

from ..analysis.align import LOOKAHEAD
from ..base.outputs import NO_INPUTS, Inputs, atomic_output
from ..model import P2P_OPS
from . import runtime
from .plan import Plan, finalize
from .runner import finding_key, run_plan, site_key


def units_of(plan: Plan) -> dict:
    """unit -> [(replay rank, action index)]."""
    units: dict = {}
    for r, acts in enumerate(plan.ranks):
        pos: dict = {}
        for k, a in enumerate(acts):
            if a["k"] != "op":
                continue
            if a["op"] in P2P_OPS:
                src, dst = (r, a.get("p")) if a["op"] == "send" else (a.get("p"), r)
                key = (a["g"], "p2p", src, dst)
            else:
                key = (a["g"], "c")
            n = pos.get(key, 0)
            pos[key] = n + 1
            units.setdefault(key + (n,), []).append((r, k))
    return units


def subplan(plan: Plan, units: dict, keep) -> Plan:
    drop = {rk for u, rks in units.items() if u not in keep for rk in rks}
    p = plan.copy()
    p.ranks = [[a for k, a in enumerate(acts) if (r, k) not in drop] for r, acts in enumerate(p.ranks)]
    finalize(p)
    return p


class Minimizer:
    def __init__(self, plan: Plan, target, workdir: str, timeout_s: float = 2.0, max_tests: int = 40, log=None):
        self.plan = plan
        self.target = target  # (kind, group, ranks, sites) in recorded terms
        self.workdir = workdir
        self.timeout_s = timeout_s
        self.max_tests = max_tests
        self.units = units_of(plan)
        self.cache: dict = {}
        self.tests = 0
        self.log = log or (lambda msg: None)

    def key_of(self, outcome):
        f = outcome.report.first if outcome.report is not None and outcome.report.findings else None
        if f is None:
            return None
        kind, group, _, ranks = finding_key(f, outcome.plan.rank_map, outcome.group_map)
        return (kind, group, ranks, site_key(f))

    def test(self, keep) -> bool:
        keep = frozenset(keep)
        if keep in self.cache:
            return self.cache[keep]
        if self.tests >= self.max_tests:
            return False
        self.tests += 1
        p = subplan(self.plan, self.units, keep)
        p.timeout_s = self.timeout_s
        d = tempfile.mkdtemp(prefix=f"t{self.tests:03d}-", dir=self.workdir)
        o = run_plan(p, d)
        ok = self.key_of(o) == self.target
        self.log(f"  test {self.tests}: {len(keep)} unit(s), {sum(len(self.units[u]) for u in keep)} collective(s): "
                 f"{'reproduces' if ok else 'does not reproduce'}")
        self.cache[keep] = ok
        return ok

    def window(self, group: str, position: int) -> list:
        lo, hi = position - 2, position + LOOKAHEAD + 2
        return [u for u in self.units if u[0] == group and lo <= u[-1] <= hi]

    def run(self, group: str, position: int) -> Plan:
        units = sorted(self.units, key=_order)
        win = sorted(self.window(group, position), key=_order)
        if win and len(win) < len(units) and self.test(win):
            units = win
        units = ddmin(units, self.test)
        return subplan(self.plan, self.units, set(units))


def _order(u):
    return (str(u[0]), u[-1], str(u[1:-1]))


def ddmin(units: list, test) -> list:
    """Zeller's ddmin: a 1-minimal subset (within the test budget) for which test holds."""
    n = 2
    while len(units) >= 2:
        size = -(-len(units) // n)
        chunks = [units[i:i + size] for i in range(0, len(units), size)]
        for c in chunks:
            if len(chunks) > 2 and test(c):
                units, n = c, 2
                break
        else:
            for c in chunks:
                comp = [u for u in units if u not in c]
                if comp and test(comp):
                    units, n = comp, max(n - 1, 2)
                    break
            else:
                if n >= len(units):
                    break
                n = min(len(units), 2 * n)
    return units


# ----------------------------------------------------------------------------------------
# the standalone script
#
# A log comes from another machine: its group names, file names, labels, tags and run folder
# name are data, and the script holds them as data only. Everything taken from the log (and the
# finding's text) is one JSON document in one string literal, read with json.loads when the
# script runs; the docstring and comments hold only numbers and text escaped so that it cannot
# end them. The script is parsed before it is written: a script that does not parse, or whose
# data literal is not the document, is a bug (exit 3), never a file.

HEADER = '''#!/usr/bin/env python3
"""Reproducer written by `collcheck replay --emit-script` (torch only, gloo, CPU).

Run:    torchrun --nproc-per-node {world} {name}
Record: COLLCHECK=1 COLLCHECK_DIR=/tmp/cc torchrun --nproc-per-node {world} {name}
        collcheck diff /tmp/cc/<run-id>

Each rank re-issues its recorded collectives in the recorded order, with zero tensors of
the recorded dtypes and shapes{ranks_note}. {collectives} collective(s) in all{minimized}.
Set REPLAY_TIMEOUT_S to change the process-group timeout ({timeout} s).
The recorded run (its folder, its first finding) and the plan are RECORDED, at the end.
"""

import json
'''

def emit_script(plan: Plan, path: str, finding_text: str = "", minimized: str = "", inputs: Inputs = NO_INPUTS) -> None:
    """Write `plan` as a standalone torch program to `path`: a new executable file renamed into
    place, never written through a link (UsageError when it cannot be written)."""
    text, data = script_text(plan, os.path.basename(path), finding_text, minimized)
    check_script(text, data)
    with atomic_output(path, inputs=inputs, executable=True) as f:
        f.write(text)


def script_text(plan: Plan, name: str, finding_text: str = "", minimized: str = "") -> tuple[str, str]:
    """(the script, the JSON text of its data literal)."""
    src = inspect.getsource(runtime)
    body = src.split('"""', 2)[2]  # the runtime without its module docstring
    ranks_note = ""
    if plan.rank_map != list(range(plan.world)):
        ranks_note = f" (recorded ranks {_doc(plan.rank_map)} run as ranks 0..{plan.world - 1})"
    text = HEADER.format(world=int(plan.world), name=_doc(name), ranks_note=ranks_note, collectives=plan.n_ops(),
                         minimized=_doc(minimized), timeout=_doc(plan.timeout_s))
    text += "\n" + body.strip() + "\n\n\n"
    lines, data = data_literal(plan, finding_text, minimized)
    text += lines + "\nPLAN = RECORDED[\"plan\"]\n\n"
    text += 'if __name__ == "__main__":\n    main(PLAN)\n'
    return text, data


def data_literal(plan: Plan, finding_text: str = "", minimized: str = "") -> tuple[str, str]:
    """(`RECORDED = json.loads(...)` as Python source, the JSON text it holds).

    One string literal, split into adjacent pieces (Python joins them into one constant) so that
    the file shows one recorded action per line: {"finding", "minimized", "plan": plan.to_json()}.
    Non-ASCII characters, quotes, backslashes and line breaks are JSON escapes inside a repr():
    no piece can end the literal; inf and nan (a damaged tag) are JSON's Infinity and NaN."""
    doc = plan.to_json()
    head = {k: v for k, v in doc.items() if k != "ranks"}
    pieces = [(f'{{"finding": {_json(finding_text)}, "minimized": {_json(minimized)},', None),
              (' "plan": {' + "".join(f"{_json(k)}: {_json(v)}, " for k, v in head.items()) + '"ranks": [', None)]
    for r, acts in enumerate(doc["ranks"]):
        recorded = plan.rank_map[r] if r < len(plan.rank_map) else "?"
        pieces.append(("  [", f"rank {r} (recorded rank {_doc(recorded)})"))
        pieces += [("   " + _json(a) + ("," if k + 1 < len(acts) else ""), None) for k, a in enumerate(acts)]
        pieces.append(("  ]" + ("," if r + 1 < len(doc["ranks"]) else ""), None))
    pieces.append((" ]}}", None))
    out = ["RECORDED = json.loads("]
    for piece, comment in pieces:
        out.append(f"    {piece!r}" + (f"  # {comment}" if comment else ""))
    out.append(")")
    return "\n".join(out) + "\n", "".join(p for p, _ in pieces)


def check_script(text: str, data: str) -> None:
    """The script parses and holds `data` as one constant (its only log-derived text): else a bug."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise RuntimeError(f"the emitted script does not parse (line {exc.lineno}): not written") from None
    if not any(isinstance(n, ast.Constant) and n.value == data for n in ast.walk(tree)):
        raise RuntimeError("the emitted script does not hold its plan as one literal: not written")
    json.loads(data)  # (a ValueError here is a bug too)


def _json(value) -> str:
    """JSON text, ASCII only (every other character an escape); inf and nan as Infinity and NaN."""
    return json.dumps(value, ensure_ascii=True, allow_nan=True)


def _doc(value) -> str:
    """`value` as text for the docstring or a comment: JSON's escapes (quotes, backslashes, line
    breaks, non-ASCII), which cannot end a docstring or a comment; plain text stays as it is."""
    return _json(value if isinstance(value, str) else str(value))[1:-1]
