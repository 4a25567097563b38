"""The observation-window selection step in PyTorch, as the papers' code writes it (SnapKV,
Li et al. 2024, Sec. 4.2; PyramidKV, Cai et al. 2025; HitKV, Sec. "Hit-based KV Eviction"):
the peer kvc-bench times libkvc's step against. Keys arrive already rotated (the usual state
of a PyTorch cache); libkvc rotates stored keys as it reads them. One call runs every layer:
window attention, the indicator, top-k, and the gather of the kept K/V.
"""
import math

import torch
import torch.nn.functional as F


def pyramid_budgets(budget, window, layers, beta, prefix):
    """PyramidKV's linear schedule, rounded as libkvc's pyramid_budgets() does."""
    average = budget - window
    smallest = average // beta
    largest = 2 * average - smallest
    if largest > prefix:
        largest, smallest = prefix, 2 * average - prefix
    shares = [average] if layers == 1 else [largest - (largest - smallest) * l / (layers - 1) for l in range(layers)]
    budgets = [int(math.floor(s)) for s in shares]
    for l in range(average * layers - sum(budgets)):
        budgets[l % layers] += 1
    return [b + window for b in budgets]


def make_window_step(device, dtype, indicator, pyramid, layers=32, q_heads=32, kv_heads=8, head_dim=128, window=32,
                     prefix=32768, budget=1024, pool_kernel=7, theta=0.5, beta=20, **_):
    """indicator: "pooled" (SnapKV/PyramidKV) or "hits" (HitKV/P-HitKV); pyramid: PyramidKV budgets."""
    group, slots = q_heads // kv_heads, prefix + window
    gen = torch.Generator(device=device).manual_seed(0)
    keys = [torch.randn(kv_heads, slots, head_dim, device=device, dtype=dtype, generator=gen) for _ in range(layers)]
    values = [torch.randn(kv_heads, slots, head_dim, device=device, dtype=dtype, generator=gen) for _ in range(layers)]
    queries = [torch.randn(q_heads, window, head_dim, device=device, dtype=dtype, generator=gen) for _ in range(layers)]
    budgets = pyramid_budgets(budget, window, layers, beta, prefix) if pyramid else [budget] * layers
    causal = torch.full((window, window), float("-inf"), device=device).triu(1)
    rows = group * window
    hits_needed = math.ceil(theta * rows)

    def layer_step(q, k, v, layer_budget):
        k_rep = k.repeat_interleave(group, dim=0)  # [q_heads, slots, d]
        logits = torch.matmul(q, k_rep.transpose(1, 2)).float() / math.sqrt(head_dim)
        logits[:, :, prefix:] += causal
        probs = logits.softmax(dim=-1)[:, :, :prefix]  # [q_heads, window, prefix]
        cumulative = probs.sum(dim=1).view(kv_heads, group, prefix).sum(dim=1)  # [kv_heads, prefix]
        keep = layer_budget - window
        if indicator == "pooled":
            rank = F.max_pool1d(cumulative.unsqueeze(1), pool_kernel, stride=1, padding=pool_kernel // 2).squeeze(1)
        else:
            hit_k = min(layer_budget, prefix)
            top = probs.topk(hit_k, dim=-1).indices.view(kv_heads, rows * hit_k)
            hits = torch.zeros(kv_heads, prefix, device=device, dtype=torch.int32)
            hits.scatter_add_(1, top, torch.ones_like(top, dtype=torch.int32))
            # Keys with hit rate >= theta first, then padded by cumulative attention (which is < rows + 1).
            rank = cumulative + (hits >= hits_needed).float() * (rows + 1)
        kept = rank.topk(keep, dim=-1).indices.sort(dim=-1).values
        index = torch.cat([kept, torch.arange(prefix, slots, device=device).expand(kv_heads, window)], dim=1)
        index = index.unsqueeze(-1).expand(-1, -1, head_dim)
        return k.gather(1, index), v.gather(1, index)

    def step():
        return [layer_step(queries[l], keys[l], values[l], budgets[l]) for l in range(layers)]

    return step
