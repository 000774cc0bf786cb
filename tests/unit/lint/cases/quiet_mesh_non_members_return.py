"""Ranks outside a device mesh return before its collectives: they are not its members."""
import torch
import torch.distributed as dist


def scatter_on_mesh(tensor: torch.Tensor, mesh, mesh_dim: int) -> torch.Tensor:
    my_coordinate = mesh.get_coordinate()
    if my_coordinate is None:
        return tensor.new_empty(0)
    group = mesh.get_group(mesh_dim)
    dist.broadcast(tensor, src=dist.get_global_rank(group, 0), group=group)
    return tensor
