"""Blame from the program's source (analysis/source.py), whatever the trace looks like: generated
training loops on two or four ranks, written as real files, where one rank (the first or the
last) takes a rank-dependent branch (extra collectives, or an early `break` / `return`) at a
random depth of a chain of helpers; each rank's log written as a gloo job records it
(support/rank_programs.py). The extra calls are drawn, or the same op as the common call that
follows them, or the same call (gloo pairs it silently and the ranks part slots before their
calls differ). The first finding blames that rank and quotes the branch's condition with its
line; on two ranks the source decides (the trace reads the same whichever rank took the
branch), on four the majority names the rank and the source says what it did."""

from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support import examples
from support import rank_programs as rp

from collcheck.analysis.diff import analyse

SETTINGS = settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
CALLS = st.tuples(st.sampled_from(sorted(rp.OPS)), st.sampled_from(rp.SIZES)).map(
    lambda c: (c[0], 0) if c[0] == "barrier" else c)


def allowed(form: str, world: int, culprit: int) -> bool:
    """Whether this form of the rank test lets exactly the culprit in."""
    return {"is_main": culprit == 0, "last": culprit == world - 1,
            "not_zero": world == 2, "not_main": world == 2 and culprit == 1}.get(form, True)


@st.composite
def programs(draw):
    """(Program, mirrors): see rank_programs.save."""
    world = draw(st.sampled_from((2, 4)), label="world")
    culprit = draw(st.sampled_from((0, world - 1)), label="culprit")
    form = draw(st.sampled_from([f for f in rp.ENTER_FORMS if allowed(f, world, culprit)]), label="form")
    depth = draw(st.integers(1, 4), label="depth")
    levels = [(draw(st.lists(CALLS, max_size=2)), draw(st.lists(CALLS, max_size=2))) for _ in range(depth + 1)]
    if not any(levels[depth]):
        levels[depth] = ([draw(CALLS)], [])
    at = draw(st.integers(0, depth), label="branch level")
    statements = sum(map(len, levels[at])) + (at < depth)
    exits = draw(st.integers(0, 3), label="exit") == 0  # an early exit in a quarter of the programs
    pos = draw(st.integers(0, statements - 1 if exits else statements), label="position")
    loop = draw(st.integers(2, 5), label="steps")
    steps = (draw(st.sampled_from(("every", "and", "and_first", "nested")), label="step test"),
             draw(st.integers(0, loop - 1), label="step"))
    extras = [] if exits else [(op, n, via) for (op, n), via in draw(
        st.lists(st.tuples(CALLS, st.booleans()), min_size=1, max_size=2), label="extras")]
    mirrors = [draw(st.sampled_from((None, "op", "call")), label="mirror") for _ in extras]
    final = draw(CALLS, label="after the loop")
    return rp.Program(world, culprit, depth, levels, at, pos, form, steps, extras, loop, final), mirrors


@SETTINGS
@given(case=programs(), ending=st.sampled_from(("killed", "raised")))
def test_the_rank_that_took_a_rank_branch_is_blamed_from_the_source(case, ending):
    p, mirrors = case
    with tempfile.TemporaryDirectory() as d:
        path = rp.save(d, p, mirrors)
        run, slot = rp.write_run(d, path, p.world, ending)
        findings = analyse(run).findings
    assert findings, "no finding"
    f = findings[0]
    event(f"{p.world} ranks, {'an early exit' if p.exits else 'extra calls'}: {f.kind}"
          f"{' before the calls differ' if f.position < slot else ''}")
    said = (f.kind, f.position, slot, f.ranks, f.details.get("decided_by"), f.details.get("condition"), f.message)
    assert f.ranks == [p.culprit], said
    assert f.details.get("decided_by") == ("source" if p.world == 2 else "majority"), said
    assert f.details["condition"] == {"file": path, "line": p.cond_line, "text": p.cond_text}, said
    assert p.cond_text in f.message, said
