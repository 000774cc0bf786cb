"""DTensor and tensor parallel (torch 2.13: torch/distributed/tensor/_api.py, _dispatch.py,
_redistribute.py, _collective_utils.py, parallel/api.py). Their collectives play no role of their
own to compare; the label says which DTensor call the user made (the outermost of these frames, or
the DTensor op that needed its inputs redistributed) and what moved: the placement change over a
mesh dimension ("Shard(0) -> Replicate() over tp", read from redistribute_local_tensor's loop),
or torch's step (`scatter over dp`)."""

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
    # a tensor-parallel style's forward hooks (parallel/style.py: ColwiseParallel, RowwiseParallel,
    # SequenceParallel, PrepareModuleInput/Output) redistribute a module's inputs and outputs
    ("distributed/tensor/parallel/style.py", "_prepare_input_fn"): "tensor parallel (a module's input)",
    ("distributed/tensor/parallel/style.py", "_prepare_output_fn"): "tensor parallel (a module's output)",
    # the gradients of from_local / to_local (_FromTorchTensor.backward, _ToTorchTensor.backward) and of
    # redistribute (_redistribute_backward)
    (_API, "backward"): "DTensor backward",
    ("distributed/tensor/_redistribute.py", "_redistribute_backward"): "backward of DTensor.redistribute()",
}


def placement(p) -> str:
    """'Shard(0)', 'Replicate()', 'Partial(sum)', '_StridedShard(dim=0, sf=2)'."""
    if type(p).__name__ == "Shard":
        return f"Shard({p.dim})"
    return repr(p)


def _transform(local: dict) -> str | None:
    """redistribute_local_tensor (_redistribute.py): one placement change per mesh dimension, in its
    loop `for transform_info in optimized_transform_infos` (mesh_dim, src_dst_placements; a
    _FlattenedTransformInfo merges several dimensions, original_mesh_dims)."""
    info, mesh = local.get("transform_info"), local.get("device_mesh")
    if info is None:
        return None
    src, dst = info.src_dst_placements
    names = getattr(mesh, "mesh_dim_names", None)
    dims = getattr(info, "original_mesh_dims", None) or (info.mesh_dim,)
    over = "+".join(names[d] if names and d < len(names) else f"mesh dim {d}" for d in dims)
    return f"{placement(src)} -> {placement(dst)} over {over}"


def _implicit(local: dict) -> str | None:
    """OpDispatcher.redistribute_local_args (_dispatch.py): `op_info.schema.op` is the DTensor op
    whose input `i` had placements that do not fit it."""
    op = local["op_info"].schema.op
    return f"DTensor {op} (implicit redistribution of argument {local['i']})"


def _over(step: str):
    """mesh_scatter / mesh_broadcast (_collective_utils.py: `mesh`, `mesh_dim` arguments):
    distribute_tensor's and parallelize_module's placement of a tensor from one rank."""
    def read(local: dict) -> str:
        names = getattr(local["mesh"], "mesh_dim_names", None)
        d = local["mesh_dim"]
        return f"{step} over {names[d] if names and d < len(names) else f'mesh dim {d}'}"
    return read


_UTILS = "distributed/tensor/_collective_utils.py"
DETAILS = {("distributed/tensor/_redistribute.py", "redistribute_local_tensor"): _transform,
           (_UTILS, "mesh_scatter"): _over("scatter"), (_UTILS, "mesh_broadcast"): _over("broadcast")}
ENTRY_DETAILS = {("distributed/tensor/_dispatch.py", "redistribute_local_args"): _implicit}


def _tp_parameter(frame) -> str | None:
    """A parallel style's _partition_*_fn (parallel/style.py): which parameter it is placing, by its
    name in the model: the style's loop `for name, param in module.named_parameters()` (Colwise,
    the embedding styles), or for RowwiseParallel's linear (no loop: weight, then bias) the first
    not yet a DTensor; the module path from the `parallelize_module` frames above (each dict-plan
    level's loop `for _, submodule in matched_children` names the child it descends into)."""
    local = frame.f_locals
    if "param" in local:
        param = local["name"]
    else:
        module = local["module"]
        param = "bias" if hasattr(getattr(module, "weight", None), "placements") else "weight"
    path = []
    f = frame.f_back
    while f is not None and "distributed/tensor/" in f.f_code.co_filename.replace("\\", "/"):
        if f.f_code.co_name == "parallelize_module":
            child = f.f_locals.get("_")
            if isinstance(child, str):
                path.append(child)
        f = f.f_back
    return ".".join([*reversed(path), param])


_STYLE = "distributed/tensor/parallel/style.py"
FRAME_DETAILS = {(_STYLE, name): _tp_parameter for name in ("_partition_linear_fn", "_partition_embedding_fn")}
