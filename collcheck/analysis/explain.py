"""One paragraph per finding that a user can act on: who did what, where, and what it means.

Each kind has its own small function (`_TEXTS`); the field mismatches share `_field_text`.
"""

from __future__ import annotations

from ..knowledge import fixes, sites
from ..knowledge.frameworks import split_chain
from ..model import Run, group_label, rank_ranges
from .findings import Finding
from .hang import sync_text, where_killed
from .pipeline import microbatch_text


def explain(run: Run, f: Finding) -> str:
    return _TEXTS.get(f.kind, _field_text)(run, f)


def better_fix(run: Run, f: Finding, divergences: bool) -> str | None:
    """Advice that fits this run better than the kind's usual fix (knowledge/fixes.py BY_KIND), if any."""
    if f.details.get("microbatches"):
        return fixes.SAME_MICROBATCHES
    if f.details.get("chains"):
        return fixes.SAME_PASSES
    fix = framework_fix(f) if f.kind not in ("hang", "deadlock") else None
    if fix:
        return fix
    if f.details.get("group_hint") is not None:
        return fixes.pass_the_group(f"ranks {rank_ranges(f.ranks)}")
    if f.kind not in ("hang", "deadlock"):
        events = [e for e in [*f.events.values(), f.expected] if e is not None]
        roles = [e.sig.role.partition(" of ")[0] for e in events if e.sig.role]  # ("... of <module>")
        fix = next((fixes.BY_ROLE[r] for r in roles if r in fixes.BY_ROLE), None)
        if fix:
            return fix
    if f.kind == "deadlock" and f.details.get("waited_on_by"):
        return fixes.branch_on_one_group(_ranks(f.ranks), f.group)
    if f.kind == "hang" and not divergences and f.details.get("root_causes"):
        return fixes.LOOK_AT_ROOT_CAUSES
    if f.kind == "missing" and f.details.get("stopped") and all(
            run.ranks[r].state == "killed" and run.ranks[r].dump_site is not None for r in f.ranks):
        return fixes.SLOW_NOT_SKIPPED
    return None


def _ranks(ranks) -> str:
    return f"rank{'s' if len(ranks) != 1 else ''} {rank_ranges(ranks)}"


def _others(f: Finding) -> list[int]:
    return sorted(r for r in f.events if r not in f.ranks)


def _culprit_event(f: Finding):
    return next((f.events[r] for r in f.ranks if f.events.get(r)), None)


def _ev(e) -> str:
    if e is None:
        return "nothing (its sequence ended)"
    view = split_chain(e.chain) if e.chain else None
    words = [w for w in (e.label, view.call.words if view and view.call else None) if w]
    label = f" [{'; '.join(words)}]" if words else ""
    return f"{e.describe()}{label} at {where(e, view)}"


def where(e, view=None) -> str:
    """The line the user can change of an event's call (knowledge/sites.user_site)."""
    return sites.user_site(e.site, e.chain)


def framework_fix(f: Finding) -> str | None:
    """The fix in the terms of the framework that issued the culprits' call (Lightning's
    `self.log`, accelerate's `gather`), when one did."""
    for r in f.ranks:
        e = f.events.get(r)
        call = split_chain(e.chain).call if e is not None and e.chain else None
        if call is not None and call.fix:
            return call.fix
    return None


def _end(log) -> str:
    """How a rank's log ended, with the evidence: where a killed rank was, what a rank raised."""
    if log.state == "killed" and log.dump_site is not None:
        return f"killed {where_killed(log)}"
    if log.state == "recording-stopped":
        return f"recording stopped: {log.stopped}; unknown after that"
    if log.state == "dumped":
        n = len(log.sig)
        last = f": it last enqueued {_ev(log.event(n - 1))}" if n else ""
        return f"no collective pending in its Flight Recorder dump{last}"
    if log.state == "raised":
        message = (log.exception[1].strip().splitlines() or [""])[0]
        if message.startswith("[") and "] " in message:  # gloo's '[/path/file.cc:78] ' prefix
            message = message.split("] ", 1)[1]
        if len(message) > 120:
            message = message[:119] + "…"
        return f"raised {log.exception[0]}" + (f" ('{message}')" if message else "")
    return log.state


def _ddp_sync_counts(run: Run, f: Finding, e) -> str:
    """For a skipped or extra DDP gradient all-reduce: how many each rank issued in the group,
    which tells uneven inputs or a rank-dependent no_sync() from a one-off skipped call."""
    if e is None or e.sig.role != "gradient bucket":
        return ""
    if any(run.ranks[r].state in ("raised", "crashed") for r in f.events):
        return ""  # the counts differ because a rank failed, not because of how it iterated
    sigs = {i for i, s in enumerate(run.signatures) if s.role == "gradient bucket"}
    counts = {}
    for r in sorted(f.events)[:16]:
        log = run.ranks[r]
        counts[r] = sum(1 for i in log.group_events(f.group) if log.sig[i] in sigs)
    if len(set(counts.values())) < 2:
        return ""
    per_rank = ", ".join(f"rank {r}: {n}" for r, n in counts.items())
    return (f"; the ranks issued different numbers of DDP gradient all-reduces ({per_rank}): uneven "
            "inputs without join(), or no_sync() / gradient accumulation on some ranks only")


def _missing(run: Run, f: Finding) -> str:
    others = _others(f)
    how = "stopped" if f.details.get("stopped") else "skipped it"
    text = (f"{_ranks(f.ranks)} {how} before {_ev(f.expected)} which {_ranks(others)} issued as collective "
            f"#{f.number} of group {f.group}")
    if f.details.get("stopped"):
        text += " (" + ", ".join(f"rank {r}: {_end(run.ranks[r])}" for r in f.ranks) + ")"
    ddp = _ddp_sync_counts(run, f, f.expected)
    if ddp:
        return text + ddp
    failed = all(run.ranks[r].state in ("raised", "crashed") for r in f.ranks)
    if f.details.get("blame"):
        return text + _blame_text(f)
    if f.details.get("no_majority") and not failed:  # a rank that failed did not "skip" by design
        text += (f"; with no majority this is the same as {_ranks(others)} issuing one more collective "
                 "(e.g. uneven inputs)")
    return text


def _extra(run: Run, f: Finding) -> str:
    others = _others(f)
    e = _culprit_event(f)
    span = f.details.get("span", 1)
    which = f"collective #{f.number}" if span == 1 else f"collectives #{f.number}..#{f.number + span - 1}"
    first = f"{_ev(e)}{f' and {span - 1} more' if span > 1 else ''}"
    text = (f"{_ranks(f.ranks)} issued {first} as {which} of group {f.group}; "
            f"{_ranks(others) if others else 'ranks -'} never did")
    ddp = _ddp_sync_counts(run, f, e)
    if ddp:
        return text + ddp
    if f.details.get("group_hint") is not None:
        text += (f"; ranks {rank_ranges(f.ranks)} are exactly the members of {group_label(run, f.details['group_hint'])}: "
                 "a collective called without `group=` (so on the default group)?")
    if f.details.get("blame"):
        return text + _blame_text(f)
    if f.details.get("no_majority"):
        text += f"; with no majority this is the same as {_ranks(others)} skipping it"
    return text


def _blame_text(f: Finding) -> str:
    """Why these ranks, not the others, when no majority said so (blame.py's rule)."""
    return f"; {_ranks(f.ranks)} out of step: {f.details['blame']}"


def _order_mismatch(run: Run, f: Finding) -> str:
    threads = {e.thread for e in f.events.values() if e is not None}
    return (f"{_ranks(f.ranks)} issued collectives #{f.number}..#{f.number + f.details['window'] - 1} of "
            f"group {f.group} in a different order (permutation {list(f.details['permutation'])} of the "
            f"majority's order); first: {_ev(f.events.get(f.ranks[0]))} vs {_ev(f.expected)}"
            + (f"; threads: {', '.join(sorted(threads))}" if len(threads) > 1 else "")
            + ("; " + _silent_text(f) if f.details.get("silent") else ""))


def _non_member_call(run: Run, f: Finding) -> str:
    d = f.details
    where = f" at {sites.short(d['site'])}" if d.get("site") else ""
    times = f" ({d['count']} calls)" if d["count"] > 1 else ""
    groups = (f"; rank {f.ranks[0]} is not in the groups of ranks " + ", ".join(map(str, d["outside"]))
              if d["outside"] else "")
    they = "it is not a member" if len(f.ranks) == 1 else "they are not members"
    return (f"{_ranks(f.ranks)} called {d['api']}{where}{times} on a group {they} of: torch skipped it with a "
            f"warning, so that group misses a member{groups}")


def _group_mismatch(run: Run, f: Finding) -> str:
    by_call: dict[str, list] = {}
    for r, v in sorted(f.details["creations"].items()):
        if v is None:
            call = f"no such call ({_end(run.ranks[r])})"
        else:
            call = f"ranks {v['ranks']}" + (f" named {v['desc']!r}" if v.get("desc") else "")
        by_call.setdefault(call, []).append(r)
    parts = "; ".join(f"{_ranks(rs)}: {call}" for call, rs in by_call.items())
    return f"new_group call #{f.details['index']} got different ranks: {parts}"


def _unmatched_p2p(run: Run, f: Finding) -> str:
    d = f.details
    e = next((x for x in f.events.values() if x is not None), None)
    text = (f"{_ev(e)}: rank {d['src']} -> rank {d['dst']} message #{f.number} in group {f.group} "
            f"has no matching {d['missing']}")
    peer = d["src"] if d["missing"] == "send" else d["dst"]
    if d.get("any_source"):
        return (f"{_ev(e)}: rank {d['dst']}'s receive from any source (message #{f.number} in group {f.group}) was "
                f"never reached by a send; {_ranks(d['any_source'])} send to it: one of them did not send "
                "the message it waits for")
    if d.get("elsewhere"):
        text += (f"; rank {peer} exchanges with rank {d['dst'] if peer == d['src'] else d['src']} on another group: "
                 "the two sides may be pairing on different groups")
    elif f.ranks == [peer]:
        text += f"; rank {peer} never posted the {d['missing']} (the call that should have made it: its own sequence)"
    return text + ("; " + microbatch_text(d) if d.get("microbatches") else "")


def _split_mismatch(run: Run, f: Finding) -> str:
    pairs = "; ".join(f"rank {s} sends {n} elements to rank {d}, which expects {m}"
                      for s, d, n, m in f.details["pairs"])
    more = f.details["pairs_total"] - len(f.details["pairs"])
    return (f"in {_ev(_culprit_event(f))} (collective #{f.number} of group {f.group}): {pairs}"
            + (f"; {more} more pair(s)" if more > 0 else ""))


def _field_text(run: Run, f: Finding) -> str:
    """op/shape/dtype/reduce op/root/semantic/tag mismatches: the culprit's call vs the reference."""
    d = f.details
    if d.get("chains"):
        return _chain_text(f) + (_blame_text(f) if d.get("blame") else "")
    if d.get("p2p"):
        text = (f"send rank {d['src']} -> rank {d['dst']} #{f.number}: {_ev(f.events.get(d['src']))} "
                f"vs recv {_ev(f.events.get(d['dst']))}")
    else:
        by_call: dict[str, list] = {}  # the culprits need not agree among themselves
        for r in f.ranks:
            if f.events.get(r) is not None:
                by_call.setdefault(_ev(f.events[r]), []).append(r)
        mine = "; ".join(f"{_ranks(rs)} issued {call}" for call, rs in by_call.items()) or f"{_ranks(f.ranks)} issued nothing"
        text = f"{mine} where {_ranks(_others(f))} issued {_ev(f.expected)} (collective #{f.number} of group {f.group})"
    if d.get("blame"):
        text += _blame_text(f)
    if d.get("silent"):
        text += "; " + _silent_text(f)
    elif d.get("nccl_note"):
        text += "; " + d["nccl_note"]
    if d.get("microbatches"):
        text += "; " + microbatch_text(d)
    return text


# what NCCL made of a slot whose different calls completed together (they ran as one collective)
_SILENT = {
    "op_mismatch": "each rank ran its own kernel on the others' bytes",
    "order_mismatch": "each slot paired two different collectives: data swapped between them, or garbage where "
                      "sizes differ",
    "shape_mismatch": "the bytes that fit were moved, the rest of the larger buffer kept stale values",
    "dtype_mismatch": "each rank read the others' bytes as its own dtype: garbage values, no error",
    "reduce_op_mismatch": "each rank applied its own reduce op: the ranks hold different results",
    "root_mismatch": "each rank took the data of the root it named: the ranks hold different tensors",
    "semantic_mismatch": "data that does not belong together was combined",
}


def _silent_text(f: Finding) -> str:
    """The slot completed on every rank under NCCL: what that did to the data, not a hang."""
    ops = {e.sig.op for e in f.events.values() if e is not None}
    if f.kind == "op_mismatch" and "barrier" in ops and "allreduce_" in ops:
        effect = ("the barrier is a 1-element all-reduce of zeros: it added nothing to the all-reduce's "
                  "first element, left the rest of it unreduced, and synchronized nothing")
    else:
        effect = _SILENT.get(f.kind, "the data is silently wrong")
    return f"under NCCL these completed together, unchecked (silent corruption, no error): {effect}"


def _chain_text(f: Finding) -> str:
    """Equal collectives reached from different places: name where each side's chain leaves the
    frames they share (the outer lines a user recognises: the extra pass vs the training step)."""
    ref = f.expected
    by_way: dict[str, list] = {}
    for r in f.ranks:
        e = f.events.get(r)
        if e is not None:
            by_way.setdefault(_way(e, ref), []).append(r)
    mine = "; ".join(f"{_ranks(rs)} reached it {way}" for way, rs in by_way.items())
    return (f"{_ranks(f.ranks + _others(f))} issued the same {_ev(ref)} as collective #{f.number} of group "
            f"{f.group}, but {mine}, where {_ranks(_others(f))} reached it {_way(ref, f.events.get(f.ranks[0]))}; "
            "until here the ranks had issued this group's collectives from the same places: they are at "
            "different points of the program (an extra pass, a skipped step), and pair data that does not belong together")


def _way(e, other) -> str:
    """'from train.py:80 in main() via visualise()': e's chain from the first frame where it leaves `other`'s."""
    mine, theirs = list(e.chain or (e.site,)), list((other.chain if other else None) or ())
    k = 0
    while k < min(len(mine), len(theirs)) - 1 and mine[k] == theirs[k]:
        k += 1
    head = mine[k] if k < len(mine) else None
    if head is None:
        return "from ?"
    via = [x[2] for x in mine[k + 1:-1] if x is not None]
    return (f"from {sites.located(head)}"
            + (f" via {' > '.join(v + '()' for v in via[:4])}" if via else ""))


def _deadlock(run: Run, f: Finding) -> str:
    cyc = f.details["cycle"]
    hops = " -> ".join(f"rank {r} ({w})" for r, w in zip(cyc, f.details["waits"]))
    text = f"wait-for cycle: {hops} -> rank {cyc[0]}; every rank in it waits for the next one, none can proceed"
    for r, waiters in (f.details.get("waited_on_by") or {}).items():
        text += f"; rank {r} is the one out of step: {_ranks(waiters)} wait for it"
    return text


def _hang(run: Run, f: Finding) -> str:
    roots = f.details.get("root_causes") or []
    waiters = [r for r in f.details.get("waiting") or [] if r not in roots]  # a failed root is inside too
    one = len(waiters) == 1
    which = "first pending" if f.details.get("queued") else "last"
    text = f"{_ranks(waiters)} never completed {'its' if one else 'their'} {which} collective"
    if not roots and not f.details.get("edges"):
        return text + (f"; they are all inside collective #{f.number} of group {f.group} but issued different "
                       "collectives there (see the first divergence)")
    if roots:
        states = ", ".join(f"rank {r} ({_end(run.ranks[r]) if r in run.ranks else 'no log'})" for r in roots)
        if not waiters:
            return f"no rank completed its last collective: {states}"
        text += f"; {'it waits' if one else 'they wait'} on {states}"
    queued = f.details.get("queued")
    if queued:
        text += ("; " + ", ".join(f"rank {r} had enqueued {n} more behind it" for r, n in queued.items())
                 + " (it ran ahead, as under NCCL, until something waited: those wait for it, not for a peer)")
        waited = [f"rank {r}'s CPU thread waited{sync_text(run.ranks[r])}" for r in queued
                  if r in run.ranks and run.ranks[r].syncs]
        if waited:
            text += "; " + ", ".join(waited)
    victims = f.details.get("victims_of")
    if victims:
        text += (f", which failed inside the collective because of the first divergence ({victims['kind']} by "
                 f"{_ranks(victims['ranks'])})")
    return text


_TEXTS = {
    "missing": _missing, "extra": _extra, "order_mismatch": _order_mismatch, "non_member_call": _non_member_call,
    "group_mismatch": _group_mismatch, "unmatched_p2p": _unmatched_p2p, "split_mismatch": _split_mismatch,
    "deadlock": _deadlock, "hang": _hang,
}
