"""Groups in the user's terms: a DeviceMesh dimension and the rank's place on the others.

torch names the groups a DeviceMesh creates `mesh_<dim>` (their group_desc); a group of the
`dp` dimension is then "mesh dp [0, 2] at tp=0": its members, and where they sit on the mesh's
other dimensions (the index of its first member in its group of that dimension). A label is
bounded whatever the group's size (ranks.members_text) and costs no walk over the run's groups
(group_index.py).
"""

from __future__ import annotations

from .group_index import MESH
from .ranks import members_text
from .run import Run

_UNNAMED = ("", "default_pg", "undefined")


def group_label(run: Run, name: str) -> str:
    """'group 3 (mesh tp [0, 1] at dp=0)', 'group 2 (my_group)', or 'group 0'."""
    index = run.group_index
    members, desc = index.labelled(name)
    if desc.startswith(MESH) and members:
        dim = desc[len(MESH):]
        at = index.coordinates(dim, members[0])
        return f"group {name} (mesh {dim} {members_text(members)}{' at ' + at if at else ''})"
    if desc and desc not in _UNNAMED:
        return f"group {name} ({desc})"
    return f"group {name}"
