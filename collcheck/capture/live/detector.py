"""Live mode's suspicions, from the ranks' summaries alone (live.py publishes them): when to ask
the analysis, never what was found. Pure: the checker passes the clock and the summaries.

- divergence: two ranks published different signatures at one position of a group, or a send and
  its recv differ (P2P channels), or an all-to-all's split sizes do not add up (each rank's
  `balance`, live_hash.a2a_balance, sums to 0 over the group when every pair agrees);
- hang: nothing moved on any rank for `hang_s` while some rank waits in a collective (or a group
  creation, which waits for every rank) and every other rank waits too or is gone (exited, or no longer publishing). A rank that is merely busy (a
  checkpoint written while the others wait in a barrier) is a straggler: never a suspicion;
- end: every rank has exited, with unequal counts in a group or a collective never completed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .tables import RING

MASK32 = 0xFFFFFFFF
ENDED = ("end", "err")  # a summary's state `s`: the rank is done (exited, destroyed its group, raised); "p": paused


@dataclass
class Suspicion:
    kind: str  # "divergence" | "hang" | "end"
    group: str | None = None
    position: int | None = None
    ranks: list = field(default_factory=list)  # ranks in the suspected collective / waiting
    running: list = field(default_factory=list)  # ranks still alive (not exited, still publishing)
    key: object = None  # what `Detector.checked` counts positions for (a group, a P2P channel pair)


@dataclass
class _Rank:
    summary: dict
    seen: float  # when its summary last changed (checker's clock)
    moved: float  # when its progress last changed
    progress: tuple


class Detector:
    def __init__(self, world: int, hang_s: float, stale_s: float):
        self.world = world
        self.hang_s = hang_s
        self.stale_s = stale_s
        self.ranks: dict[int, _Rank] = {}
        self.checked: dict = {}  # group, channel pair or ("a2a", group) -> positions compared (or cleared)
        self.cleared_hang: tuple | None = None  # every rank's progress when a hang was cleared
        self.asked_end = False

    def update(self, now: float, summaries: dict[int, dict]) -> Suspicion | None:
        for r, s in summaries.items():
            prev = self.ranks.get(r)
            f = s.get("f") or [None, 0, None, 0]
            progress = (s.get("e"), f[0], f[3], s.get("s"), (s.get("w") or [None])[0])
            if prev is None or s.get("q") != prev.summary.get("q"):
                # when it last moved: as the rank measured it (`m`), else when its progress changed here
                moved = now - s["m"] if isinstance(s.get("m"), (int, float)) else (
                    now if prev is None or progress != prev.progress else prev.moved)
                self.ranks[r] = _Rank(s, now, moved, progress)
        groups = self._per_group("g")
        return self._groups(groups) or self._channels() or self._balances(groups) or self._hang(now) or self._end()

    def finished(self) -> bool:
        """Every rank has exited (or raised) and what that showed was looked at."""
        return self._all_ended() and (self.asked_end or self._end() is None)

    def clear(self, suspicion: Suspicion) -> None:
        """The analysis found nothing there: do not ask again until something moves."""
        if suspicion.kind == "divergence":
            self.checked[suspicion.key] = suspicion.position + 1
        elif suspicion.kind == "hang":
            self.cleared_hang = self._progress()
        else:
            self.asked_end = True

    def frozen_waiting(self, now: float, seconds: float) -> bool:
        """Nothing has moved for `seconds` and some running rank waits: a hang may be near."""
        running = [x for x in self.ranks.values() if x.summary.get("s") not in ENDED]
        return bool(running) and all(now - x.moved >= seconds for x in running) and any(
            w and w[1] + now - x.seen >= seconds for x in running for w in (x.summary.get("f"), x.summary.get("w")))

    def running(self) -> list[int]:
        return sorted(r for r, x in self.ranks.items() if x.summary.get("s") not in ENDED)

    def _all_ended(self) -> bool:
        return len(self.ranks) == self.world and not self.running()

    def _progress(self) -> tuple:
        return tuple(sorted((r, x.progress) for r, x in self.ranks.items()))

    def _suspect(self, key, group: str, j: int, ranks) -> Suspicion:
        return Suspicion("divergence", group, j, sorted(ranks), self.running(), key)

    # -- divergence ---------------------------------------------------------------------------
    def _per_group(self, field_name: str) -> dict[str, dict[int, list]]:
        out: dict[str, dict[int, list]] = {}
        for r, x in self.ranks.items():
            for name, g in (x.summary.get(field_name) or {}).items():
                out.setdefault(name, {})[r] = g
        return out

    def _compare(self, key, group: str, per_rank: dict[int, list]) -> Suspicion | None:
        """Slot by slot from the first one not compared yet, up to what every rank has issued; at
        once when every rank issued as many with the same rolling hash (nothing differs)."""
        end = min(g[0] for g in per_rank.values())
        if len({(g[0], g[1]) for g in per_rank.values()}) == 1:
            self.checked[key] = max(self.checked.get(key, 0), end)
            return None
        windows = list(per_rank.values())
        if all(g[2].__class__ is bytes for g in windows):  # (thousands of ranks: a few counts and windows)
            windows = {(g[0], None, g[2]) for g in windows}
        for j in range(max(self.checked.get(key, 0), end - RING), end):  # (no rank holds older ones)
            sigs = {_sig_at(g, j) for g in windows} - {None}  # (a rank far ahead: out of its window)
            if len(sigs) > 1:
                return self._suspect(key, group, j, per_rank)
        self.checked[key] = max(self.checked.get(key, 0), end)
        return None

    def _groups(self, groups: dict) -> Suspicion | None:
        for name, per_rank in sorted(groups.items()):
            if len(per_rank) > 1:
                found = self._compare(name, name, per_rank)
                if found:
                    return found
        return None

    def _channels(self) -> Suspicion | None:
        """A rank's sends to a peer against that peer's recvs from it, in order."""
        for r, x in sorted(self.ranks.items()):
            for name, send in sorted((x.summary.get("c") or {}).items()):
                group, sep, peer = name.rpartition(">")
                other = self.ranks.get(int(peer)) if sep and peer.isdigit() else None
                recv = other and (other.summary.get("c") or {}).get(f"{group}<{r}")
                if recv:
                    found = self._compare((group, r, int(peer)), group, {r: send, int(peer): recv})
                    if found:
                        return found
        return None

    def _balances(self, groups: dict) -> Suspicion | None:
        """All-to-all split sizes: each rank's balance for a slot, summed over the whole group, is 0."""
        for name, per_rank in sorted(groups.items()):
            size = max(g[3] for g in per_rank.values())
            if not size or len(per_rank) < size:
                continue  # (members unknown, or not all of them have published the group yet)
            key = ("a2a", name)
            common = set.intersection(*(set(g[4]) for g in per_rank.values()))
            for j in sorted(k for k in common if k >= self.checked.get(key, 0)):
                if sum(g[4][j] for g in per_rank.values()) & MASK32:
                    return self._suspect(key, name, j, per_rank)
                self.checked[key] = j + 1
        return None

    # -- hang and end -----------------------------------------------------------------------------
    def _hang(self, now: float) -> Suspicion | None:
        if len(self.ranks) < self.world or self._progress() == self.cleared_hang:
            return None
        waiting, busy, creating = [], [], []
        for r, x in self.ranks.items():
            if x.summary.get("s") in ENDED:
                continue  # exited or raised: it will issue nothing more
            if x.summary.get("s") == "p" or x.summary.get("x"):
                return None  # recording paused or stopped there: what it does is not known
            if now - x.moved < self.hang_s:
                return None  # something moved
            stale = now - x.seen > self.stale_s  # no longer publishing: killed, or frozen whole
            f, call = x.summary.get("f"), x.summary.get("w")  # in a collective, in a group creation
            if any(w and w[1] + (now - x.seen) >= self.hang_s for w in (f, call)):
                waiting.append(r)
                if call:
                    creating.append(r)
            elif not stale:
                busy.append(r)
        if not waiting or busy:
            return None
        # a rank stuck in a group creation has not recorded that group: its log ends there, as the
        # post-mortem will read it (not as a rank that may yet create it)
        return Suspicion("hang", ranks=sorted(waiting), running=[r for r in self.running() if r not in creating])

    def _end(self) -> Suspicion | None:
        if self.asked_end or not self._all_ended() or any(x.summary.get("x") for x in self.ranks.values()):
            return None  # (a rank whose recording stopped early has fewer collectives in its log)
        unequal = any(len({g[0] for g in per_rank.values()}) > 1 for per_rank in self._per_group("g").values())
        in_flight = sorted(r for r, x in self.ranks.items() if x.summary.get("f"))
        if not unequal and not in_flight:
            return None
        return Suspicion("end", ranks=in_flight, running=[])


def _sig_at(g: list, j: int) -> int | None:
    """The signature a rank published for position j of a group or channel (None: out of its window)."""
    n, ring = g[0], g[2]
    first = max(0, n - RING)
    if not first <= j < n:
        return None
    k = (j - first) * 4
    return int.from_bytes(ring[k:k + 4], "little")
