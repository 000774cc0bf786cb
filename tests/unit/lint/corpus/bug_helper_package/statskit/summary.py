"""Summaries of per-rank values over the whole job."""
import torch

from .collect import global_values


def summarize(values: torch.Tensor) -> str:
    everything = global_values(values)
    return f"{everything.numel()} values, mean {everything.mean():.4f}, max {everything.max():.4f}"
