"""What benchmarks/gpu_check.py reads, and how: a log through collcheck's own reader (its header,
its groups, each collective with its issue, return and completion times), and the command line's
views of a log or a Flight Recorder dump (`collcheck export`, `collcheck show`), put side by side."""

from __future__ import annotations

import json
import math
import os

# A collcheck wire op -> its kind, as the two sources can both say it: Flight Recorder names the
# list and tensor variants of a kind alike (NCCL's all_to_all_single is "nccl:all_to_all").
FAMILY = {"allreduce_": "all_reduce", "broadcast_": "broadcast", "reduce_": "reduce", "allgather_": "all_gather",
          "_allgather_base_": "all_gather", "reduce_scatter_": "reduce_scatter",
          "_reduce_scatter_base_": "reduce_scatter", "alltoall_": "all_to_all", "alltoall_base_": "all_to_all",
          "gather_": "gather", "scatter_": "scatter", "barrier": "barrier"}


class Failed(Exception):
    """A check that cannot go on; its message is the check's one line."""


def read_events(path: str) -> tuple[dict, dict, list[dict]]:
    """(header, {gid: its `G seen` record}, collectives in event-id order) of one rank's log, each
    collective as {eid, op, gid, j, async, numel, ts, r, c, error}: times in µs since the header's
    mono_ns; `numel` the elements of its first tensor; `c` None where the log says completion could
    not be observed (a D record without `c`) or has none."""
    from collcheck.logfile.reader import read_log

    try:
        raw = read_log(path)
    except Exception as exc:  # noqa: BLE001 - collcheck's reader refused it: the check's line says so
        raise Failed(f"collcheck's reader refused {os.path.basename(path)}: {type(exc).__name__}: {exc}") from None
    strings, specs, groups, events, done = {}, {}, {}, [], {}
    for rec in raw.records:
        kind = rec["k"]
        if kind == "S":
            strings[rec["i"]] = rec["s"]
        elif kind == "V":
            specs[rec["i"]] = [math.prod(dims) for _, dims in rec["t"]]
        elif kind == "G" and rec.get("op") == "seen":
            groups[rec["gid"]] = rec
        elif kind == "C":
            events.append({"eid": len(events), "op": strings.get(rec["o"], "?"), "gid": rec["g"], "j": rec.get("j"),
                           "async": bool(rec.get("a")), "numel": (specs.get(rec.get("t")) or [0])[0], "ts": rec["ts"]})
        elif kind == "D":  # (a later D of the same event adds what it knows)
            done.setdefault(rec["i"], {}).update({k: v for k, v in rec.items() if v is not None})
    for e in events:
        d = done.get(e["eid"], {})
        e.update(r=d.get("r"), c=d.get("c"), error=d.get("e"))
    return raw.header, groups, events


def sequences_of(shown: list[dict]) -> dict[str, list[str]]:
    """Each group's ops in the order of their positions."""
    seqs: dict[str, list[tuple[int, str]]] = {}
    for s in shown:
        seqs.setdefault(s["group"], []).append((s["position"], s["op"]))
    return {g: [op for _, op in sorted(v)] for g, v in seqs.items()}


def the_log(logs: str) -> str:
    """The one rank's log of a world-size-1 run under `logs` (COLLCHECK_DIR)."""
    found = [os.path.join(root, n) for root, _, names in os.walk(logs) for n in names if n.endswith(".msgpack")]
    if len(found) != 1:
        raise Failed(f"expected one log under {logs}, found {len(found)}")
    return found[0]


def load_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as exc:
        raise Failed(f"the job left no readable {os.path.basename(path)} ({type(exc).__name__})") from None


def export_events(cli, run_dir: str, tmp: str, tag: str) -> list[dict]:
    """`collcheck export RUN --format perfetto`: each collective's slice as {group, position, op,
    ts, dur}, in the order the trace lists them (a rank's log order)."""
    out = os.path.join(tmp, f"export-{tag}.json")
    if os.path.exists(out):
        os.remove(out)
    cli("export", run_dir, "--format", "perfetto", "-o", out)
    with open(out) as f:
        trace = json.load(f)
    return [{"group": ev["args"]["group"], "position": ev["args"]["position"], "op": ev["args"]["op"],
             "ts": ev["ts"], "dur": ev["dur"]}
            for ev in trace["traceEvents"] if ev.get("ph") == "X" and ev.get("cat") == "collective"]


def show_sequences(text: str) -> dict[str, list[str]]:
    """Each group's ops, by position, from `collcheck show`'s table (run wide enough not to wrap)."""
    names, rows = None, []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("┃") and names is None:
            names = [c.strip() for c in line.strip("┃").split("┃")]
        elif line.startswith("│") and names is not None:
            cells = [c.strip() for c in line.strip("│").split("│")]
            if len(cells) == len(names) and cells[0]:
                rows.append(dict(zip(names, cells)))
    if names is None or not {"group", "pos", "op"} <= set(names):
        raise Failed(f"collcheck show printed no table with group, pos and op columns ({len(text)} characters)")
    seqs: dict[str, list[tuple[int, str]]] = {}
    for row in rows:
        seqs.setdefault(row["group"], []).append((int(row["pos"]), row["op"]))
    return {g: [op for _, op in sorted(v)] for g, v in seqs.items()}


def same_kind(log_op: str, dump_op: str, backend: str) -> str | None:
    """How a log's op and a dump's op at one position agree ('exact', 'kind', 'gloo'), None: they do not.
    gloo's Flight Recorder names a reduce-scatter (list or tensor) "gloo:all_reduce": gloo runs it as one."""
    if log_op == dump_op:
        return "exact"
    a, b = FAMILY.get(log_op, log_op), FAMILY.get(dump_op, dump_op)
    if a == b:
        return "kind"
    if backend == "gloo" and (a, b) == ("reduce_scatter", "all_reduce"):
        return "gloo"
    return None


def compare_sequences(log: dict[str, list[str]], dump: dict[str, list[str]], backend: str) -> tuple[list[str], str]:
    """(problems, figures) of each group's ops in the log against the dump: kinds, counts, order."""
    problems, how = [], {"exact": 0, "kind": 0, "gloo": 0}
    if sorted(log) != sorted(dump):
        problems.append(f"groups: log {sorted(log)}, dump {sorted(dump)}")
    for g in sorted(set(log) & set(dump)):
        a, b = log[g], dump[g]
        if len(a) != len(b):
            problems.append(f"group {g}: {len(a)} ops in the log, {len(b)} in the dump")
        for pos, (x, y) in enumerate(zip(a, b)):
            agree = same_kind(x, y, backend)
            if agree is None:
                problems.append(f"group {g} #{pos}: {x} in the log, {y} in the dump")
                break
            how[agree] += 1
    n = sum(len(v) for v in log.values())
    figures = f"{n} ops in {len(log)} group(s), same kinds in the same order ({how['exact']} named alike"
    if how["kind"]:
        figures += f", {how['kind']} by kind (a list and a tensor variant)"
    if how["gloo"]:
        figures += f", {how['gloo']} reduce-scatters that gloo's Flight Recorder names all_reduce"
    return problems, figures + ")"
