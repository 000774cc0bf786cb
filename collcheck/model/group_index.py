"""Every group of a run indexed once: names, members, descriptions and mesh coordinates.

Analysis, statistics and every view ask a group's members for each group, finding and row; a
run of 100,000 groups made each question a walk over every rank's group list (quadratic in the
groups). The index is built in one pass over the ranks' group lists, when first asked.
"""

from __future__ import annotations

MESH = "mesh_"  # torch's group_desc of the groups a DeviceMesh creates: mesh_<dim>
MAX_COORDINATES = 8  # mesh dimensions kept per rank, and indices per dimension (one each in a real mesh)


class GroupIndex:
    """The groups of `ranks` (rank -> RankLog), as the ranks recorded them."""

    def __init__(self, ranks: dict):
        self.names: list[str] = []  # first seen in rank order
        self._declared: dict[str, tuple] = {}  # members, from the first rank (dict order) that lists them
        self._labelled: dict[str, tuple[tuple, str]] = {}  # (members, desc): groups.py's labels
        seen_lists: set[int] = set()  # ranks of one kind share one group list
        first: dict[str, None] = {}
        for r in sorted(ranks):
            if id(ranks[r].groups) not in seen_lists:
                seen_lists.add(id(ranks[r].groups))
                first.update(dict.fromkeys([g.name for g in ranks[r].groups]))  # (names already seen keep their place)
        self.names = list(first)
        knowers: dict[str, list[int]] = {}
        declared, labelled = self._declared, self._labelled
        seen_lists.clear()
        for r, log in ranks.items():
            shared = id(log.groups) in seen_lists
            seen_lists.add(id(log.groups))
            for g in log.groups:
                name = g.name
                if name not in declared:
                    if g.ranks is not None:
                        declared[name] = tuple(g.ranks)
                    else:
                        knowers.setdefault(name, []).append(r)
                if not shared:  # (the first entry that lists members, else the first entry)
                    had = labelled.get(name)
                    if had is None or (g.ranks and not had[0]):
                        labelled[name] = (tuple(g.ranks or ()), g.desc or "")
        self._known = {name: tuple(sorted(set(rs))) for name, rs in knowers.items() if name not in self._declared}
        self._coordinates: dict[int, dict[str, set[int]]] | None = None
        self._by_members: dict[tuple, list[str]] | None = None

    def members(self, name: str) -> tuple:
        """Global ranks of a group as recorded; without a recorded list, the ranks that know it."""
        found = self._declared.get(name)
        return found if found is not None else self._known.get(name, ())

    def named_by_members(self, ranks: tuple) -> list[str]:
        """The first two groups (in `names` order) whose members are exactly the sorted `ranks`."""
        if self._by_members is None:
            self._by_members = {}
            for name in self.names:
                found = self._by_members.setdefault(tuple(sorted(self.members(name))), [])
                if len(found) < 2:
                    found.append(name)
        return self._by_members.get(tuple(ranks), [])

    def labelled(self, name: str) -> tuple[tuple, str]:
        """(members, desc) of the first entry that lists members (else the first entry)."""
        return self._labelled.get(name, ((), ""))

    def coordinates(self, dim: str, rank: int, most: int = MAX_COORDINATES) -> str:
        """'tp=0, pp=1': the rank's index in its group of each mesh dimension but `dim` (the
        first `most`, then '…')."""
        if self._coordinates is None:
            self._coordinates = self._mesh_coordinates()
        out = sorted(f"{d}={i}" for d, idx in self._coordinates.get(rank, {}).items() if d != dim for i in idx)
        return ", ".join(out[:most] + (["…"] if len(out) > most else []))

    def _mesh_coordinates(self) -> dict[int, dict[str, set[int]]]:
        """rank -> mesh dimension -> its indices in that dimension's groups (a few kept), for the
        ranks labels name: the first member of each mesh group."""
        mesh = [(desc[len(MESH):], members) for members, desc in self._labelled.values()
                if desc.startswith(MESH) and members]
        out: dict[int, dict[str, set[int]]] = {members[0]: {} for _, members in mesh}
        for dim, members in mesh:
            for i, r in enumerate(members):
                dims = out.get(r)
                if dims is None:
                    continue
                idx = dims.get(dim)
                if idx is None:
                    if len(dims) > MAX_COORDINATES:
                        continue  # (a hostile log's thousands of dimensions: a few are shown)
                    idx = dims[dim] = set()
                if len(idx) < MAX_COORDINATES:
                    idx.add(i)
        return out
