"""Groups in the user's terms: a DeviceMesh dimension and the rank's place on the others.

torch names the groups a DeviceMesh creates `mesh_<dim>` (their group_desc); a group of the
`dp` dimension is then "mesh dp [0, 2] at tp=0": its members, and where they sit on the mesh's
other dimensions (the index of its first member in its group of that dimension).
"""

from __future__ import annotations

from .run import Run

_MESH = "mesh_"
_UNNAMED = ("", "default_pg", "undefined")


def _groups(run: Run) -> dict[str, tuple[tuple, str]]:
    """group name -> (members, desc), from every rank's log (cached on the run)."""
    cached = run._group_table
    if cached is None:
        cached = {}
        for log in run.ranks.values():
            for g in log.groups:
                if g.name not in cached or (g.ranks and not cached[g.name][0]):
                    cached[g.name] = (tuple(g.ranks or ()), g.desc or "")
        run._group_table = cached
    return cached


def group_label(run: Run, name: str) -> str:
    """'group 3 (mesh tp [0, 1] at dp=0)', 'group 2 (my_group)', or 'group 0'."""
    members, desc = _groups(run).get(name, ((), ""))
    if desc.startswith(_MESH) and members:
        dim = desc[len(_MESH):]
        at = _coordinates(run, dim, members[0])
        return f"group {name} (mesh {dim} {list(members)}{' at ' + at if at else ''})"
    if desc and desc not in _UNNAMED:
        return f"group {name} ({desc})"
    return f"group {name}"


def _coordinates(run: Run, dim: str, rank: int) -> str:
    """'tp=0, pp=1': the rank's index in its group of each other mesh dimension."""
    out = []
    for members, desc in _groups(run).values():
        if desc.startswith(_MESH) and desc != _MESH + dim and rank in members:
            out.append(f"{desc[len(_MESH):]}={members.index(rank)}")
    return ", ".join(sorted(set(out)))
