"""MoE with routed-token counts from `torch.bincount`: an expert with a zero count on this rank skips its all-to-all."""
# expect: kind local
import torch
import torch.distributed as dist
import torch.nn as nn


class MoELayer(nn.Module):
    def __init__(self, dim: int, num_experts: int, group=None):
        super().__init__()
        self.gate = nn.Linear(dim, num_experts)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(num_experts))
        self.group = group

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        expert_idx = self.gate(hidden).argmax(-1)
        counts = torch.bincount(expert_idx, minlength=len(self.experts))
        out = torch.zeros_like(hidden)
        for e in range(len(self.experts)):
            if counts[e] == 0:  # expect: branch a
                continue
            chunk = hidden[expert_idx == e]
            dispatched = torch.empty_like(chunk)
            dist.all_to_all_single(dispatched, chunk, group=self.group)  # expect: call a
            out[expert_idx == e] = self.experts[e](dispatched)
        return out
