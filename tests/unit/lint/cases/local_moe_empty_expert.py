"""MoE dispatch: an expert with no routed tokens on this rank (`tokens.numel() == 0`) skips its all-to-all."""
# expect: kind local
import torch
import torch.distributed as dist
import torch.nn as nn


class ExpertParallelMoE(nn.Module):
    def __init__(self, dim: int, num_experts: int):
        super().__init__()
        self.router = nn.Linear(dim, num_experts)
        self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(num_experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        route = self.router(x).argmax(-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            tokens = x[route == e]
            if tokens.numel() == 0:  # expect: branch a
                continue
            received = torch.empty_like(tokens)
            dist.all_to_all_single(received, tokens)  # expect: call a
            out[route == e] = expert(received)
        return out
