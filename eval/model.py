"""The evaluation's model: a small LLaMA-style decoder (RoPE, grouped-query attention, RMSNorm,
SwiGLU, tied embeddings) whose attention can be handed to libkvc layer by layer.

`Model.forward(tokens)` is causal attention over the whole sequence (training, and the reference).
`Model.step(tokens, start, attend)` runs the tokens at positions start.. with attention supplied by
`attend(layer, q, k, v, positions)`: q [n, q_heads, head_dim], k and v [n, kv_heads, head_dim]
before RoPE (the attention rotates them, or has libkvc do it), returning [n, q_heads, head_dim];
a cache (libkvc's, or the reference FullCache) holds the past.
"""
from __future__ import annotations

import dataclasses
import json
import math
import pathlib
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass(frozen=True)
class Config:
    vocabulary: int = 8192
    layers: int = 8
    dim: int = 384
    q_heads: int = 6
    kv_heads: int = 2
    head_dim: int = 64
    hidden: int = 896  # SwiGLU's inner width
    context: int = 4096
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @staticmethod
    def load(path: pathlib.Path) -> "Config":
        return Config(**json.loads(path.read_text()))

    def save(self, path: pathlib.Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")


Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """NeoX-style rotation of [n, heads, head_dim] by the positions [n]: pairs (i, i + d/2), as
    Llama and kvc.RopeStyle.NEOX."""
    half = x.shape[-1] // 2
    # Angles in float64: at position 16K a float32 angle is off by about 1e-3 rad, and libkvc's are exact.
    frequencies = theta ** (-torch.arange(half, device=x.device, dtype=torch.float64) / half)
    angles = positions.to(torch.float64)[:, None] * frequencies[None, :]
    cos, sin = angles.cos().float()[:, None, :], angles.sin().float()[:, None, :]
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


class Block(nn.Module):
    def __init__(self, config: Config, index: int):
        super().__init__()
        self.config, self.index = config, index
        self.attention_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.wq = nn.Linear(config.dim, config.q_heads * config.head_dim, bias=False)
        self.wk = nn.Linear(config.dim, config.kv_heads * config.head_dim, bias=False)
        self.wv = nn.Linear(config.dim, config.kv_heads * config.head_dim, bias=False)
        self.wo = nn.Linear(config.q_heads * config.head_dim, config.dim, bias=False)
        self.mlp_norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        self.gate = nn.Linear(config.dim, config.hidden, bias=False)
        self.up = nn.Linear(config.dim, config.hidden, bias=False)
        self.down = nn.Linear(config.hidden, config.dim, bias=False)

    def qkv(self, x: torch.Tensor):
        """[n, dim] -> q [n, q_heads, d], k and v [n, kv_heads, d], before RoPE."""
        c, h = self.config, self.attention_norm(x)
        return (self.wq(h).view(-1, c.q_heads, c.head_dim), self.wk(h).view(-1, c.kv_heads, c.head_dim),
                self.wv(h).view(-1, c.kv_heads, c.head_dim))

    def finish(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        x = x + self.wo(attended.reshape(x.shape[0], -1))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocabulary, config.dim)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.layers))
        self.norm = nn.RMSNorm(config.dim, eps=config.norm_eps)
        for name, parameter in self.named_parameters():
            if parameter.dim() == 2:
                # GPT-2's scaled initialisation: residual outputs shrink with depth.
                std = 0.02 / math.sqrt(2 * config.layers) if name.endswith(("wo.weight", "down.weight")) else 0.02
                nn.init.normal_(parameter, std=std)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(x), self.embedding.weight)  # tied input and output embeddings

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Causal logits of [batch, n] tokens at positions 0..n-1: [batch, n, vocabulary]."""
        batch, n = tokens.shape
        positions = torch.arange(n, device=tokens.device)
        x = self.embedding(tokens).view(batch * n, -1)
        for block in self.blocks:
            q, k, v = block.qkv(x)
            q, k = (rope(t, positions.repeat(batch), self.config.rope_theta) for t in (q, k))
            split = lambda t: t.view(batch, n, -1, self.config.head_dim).transpose(1, 2)
            attended = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True, enable_gqa=True)
            x = block.finish(x, attended.transpose(1, 2).reshape(batch * n, -1))
        return self.logits(x).view(batch, n, -1)

    def step(self, tokens: torch.Tensor, start: int, attend: Attend) -> torch.Tensor:
        """Logits [n, vocabulary] of the tokens [n] at positions start.., with attention from attend()."""
        positions = torch.arange(start, start + tokens.shape[0], device=tokens.device)
        x = self.embedding(tokens)
        for block in self.blocks:
            x = block.finish(x, attend(block.index, *block.qkv(x), positions))
        return self.logits(x)


class FullCache:
    """The reference cache: every key (rotated at its position) and value kept, exact causal
    attention in float32 (what FULL means)."""

    def __init__(self, config: Config):
        self.theta = config.rope_theta
        self.keys: list[list[torch.Tensor]] = [[] for _ in range(config.layers)]
        self.values: list[list[torch.Tensor]] = [[] for _ in range(config.layers)]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor, positions: Optional[torch.Tensor]) -> None:
        """positions None: k is rotated already."""
        self.keys[layer].append(k if positions is None else rope(k, positions, self.theta))
        self.values[layer].append(v)

    def replace(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Sets the layer's rotated keys and values [slots, kv_heads, head_dim]."""
        self.keys[layer], self.values[layer] = [keys], [values]

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               positions: Optional[torch.Tensor]) -> torch.Tensor:
        """positions None: q and k are rotated already."""
        self.append(layer, k, v, positions)
        q = q if positions is None else rope(q, positions, self.theta)
        keys, values = torch.cat(self.keys[layer]), torch.cat(self.values[layer])
        n, past = q.shape[0], keys.shape[0] - q.shape[0]
        # Query i sees the past and the chunk's tokens up to itself.
        mask = torch.arange(keys.shape[0], device=q.device)[None, :] <= past + torch.arange(n, device=q.device)[:, None]
        out = F.scaled_dot_product_attention(q.transpose(0, 1).float(), keys.transpose(0, 1).float(),
                                             values.transpose(0, 1).float(), attn_mask=mask, enable_gqa=True)
        return out.transpose(0, 1).to(q.dtype)


def load(directory: pathlib.Path, device: str = "cpu", dtype: torch.dtype = torch.float32) -> Model:
    """The committed model: directory/config.json and directory/model.safetensors."""
    from safetensors.torch import load_file
    model = Model(Config.load(directory / "config.json"))
    model.load_state_dict(load_file(str(directory / "model.safetensors")))
    return model.to(device=device, dtype=dtype).eval()
