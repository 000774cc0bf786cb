"""DTensor and tensor parallel (torch 2.13: torch/distributed/tensor/_api.py, _dispatch.py,
parallel/api.py). Their collectives play no role of their own to compare; the label says which
DTensor call the user made (the outermost of these frames) and torch's step that communicated
(the innermost frame: `mesh_scatter`, `_to_replicate_tensor`, ...)."""

_API = "distributed/tensor/_api.py"

ROLES: dict = {}
PHASES: dict = {}
ENTRY_POINTS = {
    (_API, "distribute_tensor"): "distribute_tensor()",
    (_API, "distribute_module"): "distribute_module()",
    (_API, "from_local"): "DTensor.from_local()",
    (_API, "redistribute"): "DTensor.redistribute()",
    (_API, "full_tensor"): "DTensor.full_tensor()",
    # an op on DTensors whose inputs' placements do not fit it (OpDispatcher.redistribute_local_args)
    ("distributed/tensor/_dispatch.py", "redistribute_local_args"): "a DTensor op (implicit redistribution)",
    ("distributed/tensor/parallel/api.py", "parallelize_module"): "parallelize_module()",
}
