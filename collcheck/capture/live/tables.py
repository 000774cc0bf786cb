"""The recorder's per-collective state, for checkpoints (logfile/checkpoint.py) and live mode: a group's rolling hash of signatures and its last RING
signatures (the recorder's, kept in C++ on the compiled path: native/fastpath.cpp), P2P channels
alike, all-to-all balances. The training job's hot path: a multiply, an add and a store per
collective; the hash of a signature is computed once per template."""

from __future__ import annotations

from ...logfile.checkpoint import roll, signature

__all__ = ["RING", "LiveTables", "a2a_balance", "mix", "ring_bytes", "signature"]

RING = 64  # signatures kept per group: ranks this far apart are still compared slot by slot


def mix(table: dict, seq: int, j: int, sig: int) -> None:
    """The Python path's per-collective update (fastpath.cpp's `mix` on the compiled path)."""
    st = table.get(seq)
    if st is None:
        st = table[seq] = [0, [0] * RING]
    st[0] = roll(st[0], sig)
    st[1][j % RING] = sig


def ring_bytes(ring: list, n: int) -> bytes:
    """The signatures of positions max(0, n - RING) .. n - 1, oldest first, 4 bytes each."""
    first = max(0, n - RING)
    return b"".join((ring[j % RING] & 0xFFFFFFFF).to_bytes(4, "little") for j in range(first, n))


def _weight(src: int, dst: int) -> int:
    """A pseudo-random 32-bit weight per (sender, receiver) pair of group ranks."""
    x = ((src + 1) * 0x9E3779B1 ^ (dst + 1) * 0x85EBCA77) & 0xFFFFFFFF
    x ^= x >> 15
    return (x * 0x2C1B3C6D) & 0xFFFFFFFF


def a2a_balance(splits, rank: int, size: int) -> int | None:
    """all_to_all_single's sizes agree pairwise when what rank i sends to j (its input split j) is
    what j expects from i (its output split i). Each rank publishes sum_j in[j]*w(rank, j) -
    sum_j out[j]*w(j, rank) (mod 2**32): over the group the sums cancel exactly when every pair
    agrees (with weights w, a disagreement cancels only by chance). None: even splits (empty lists),
    whose sizes the record does not hold."""
    ins, outs = splits
    if len(ins) != size or len(outs) != size:
        return None
    total = sum(n * _weight(rank, j) for j, n in enumerate(ins)) - sum(n * _weight(j, rank) for j, n in enumerate(outs))
    return total & 0xFFFFFFFF


class LiveTables:
    """One recorder's live-mode tables and what live/publisher.py publishes of them: per group (or P2P
    channel) a rolling hash and ring of signatures (kept by the compiled kernels on their path:
    the recorder's engine: engine_python.py, engine_native.py), all-to-all balances, the groups' members."""

    def __init__(self, engine):
        self._engine = engine  # the recorder's (use_engine): keeps the rolling hashes and rings
        self._balances: dict[int, dict] = {}  # gid -> {position: all-to-all balance}
        self._members: dict[int, list] = {}  # gid -> its members' global ranks, by group rank

    def use_engine(self, engine) -> None:
        """Mix signatures into `engine`'s tables (the recorder's engine)."""
        self._engine = engine

    def reset(self) -> None:
        """Empty tables (a forked child; the engine empties its own)."""
        self._balances, self._members = {}, {}

    def set_members(self, gid: int, ranks: list) -> None:
        self._members[gid] = ranks

    def mix(self, seq: int, j: int, sig: int, gid: int, balance: int | None) -> None:
        """Collective `j` of group (or channel) `seq` was issued, with signature `sig` and, for an
        all_to_all_single, its `balance` (writer lock held)."""
        self._engine.mix(seq, j, sig)
        if balance is not None:  # (never a compiled template: all_to_all_single's splits vary)
            b = self._balances.setdefault(gid, {})
            b[j] = balance
            b.pop(j - RING, None)

    def hashes(self) -> dict[int, int]:
        """seq_key -> rolling hash of every group and channel (writer lock held): checkpoints."""
        return {k: h for k, h, _ in self._engine.live()}

    def state(self, group_ids: dict[str, int], seqs: dict[int, int]) -> dict:
        """What live/publisher.py publishes (writer lock held), from the recorder's group ids (name ->
        gid) and last `j` per seq_key: "g": group name -> [collectives issued, rolling hash, the last
        signatures, members, {position: all-to-all balance}]; "c": P2P channel ("<group>><peer>"
        sends, "<group><<peer>" recvs, peers as global ranks) -> [ops, hash, signatures]."""
        names = {gid: name for name, gid in group_ids.items()}
        table = {k: (h, ring) for k, h, ring in self._engine.live()}
        groups, channels = {}, {}
        for key, (h, ring) in table.items():
            n = seqs.get(key, -1) + 1
            gid, kind, peer = key >> 34, (key >> 32) & 3, key & 0xFFFFFFFF
            name = names.get(gid, str(gid))
            members = self._members.get(gid) or ()
            entry = [n, h, ring_bytes(ring, n)]
            if kind == 0:
                groups[name] = entry + [len(members), dict(self._balances.get(gid, {}))]
            elif kind in (1, 2):  # (a recv from any source pairs with no channel)
                channels[f"{name}{'>' if kind == 1 else '<'}{members[peer] if peer < len(members) else peer}"] = entry
        return {"g": groups, "c": channels}
