"""One decode step of a fixed-size cache, as the papers formulate it in PyTorch: for every
layer, attention of the new token over c + 1 cached tokens (keys stored before RoPE, rotated
to their in-cache positions 0..c as StreamingLLM and TreeKV §4.1 do), the score update, and
the eviction of one token by concatenating the survivors (Algorithm 1's "evict the element"),
which rewrites the layer's cache. Shared by streaming_, h2o_, tova_ and treekv_torch.py."""
import math

import torch


def rope(x, cos, sin):
    """NeoX RoPE over the last dim: x [..., n, d], cos/sin [n, d / 2]."""
    half = x.shape[-1] // 2
    a, b = x[..., :half].float(), x[..., half:].float()
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1).to(x.dtype)


def make_policy_step(policy, device, dtype, layers=32, q_heads=32, kv_heads=8, head_dim=128, capacity=1024,
                     sinks=4, recent_window=None):
    c, group = capacity, q_heads // kv_heads
    window = c - sinks if policy == "streaming" else (c // 2 - sinks if recent_window is None else recent_window)
    span = c - sinks - window  # TreeKV's evictable region: idx visits 1..span
    keys = torch.rand(layers, kv_heads, c + 1, head_dim, device=device, dtype=dtype) * 2 - 1
    values = torch.rand_like(keys)
    queries = torch.rand(layers, q_heads, head_dim, device=device, dtype=dtype) * 2 - 1
    sums = torch.rand(layers, kv_heads, c + 1, device=device)
    counts = torch.arange(c + 1, 0, -1, device=device, dtype=torch.float32).expand(layers, kv_heads, -1).contiguous()
    inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.arange(c + 1, device=device, dtype=torch.float32)[:, None] * inv_freq
    cos, sin = angles.cos(), angles.sin()
    ranks = torch.arange(c, device=device).expand(kv_heads, -1)
    state = {"idx": 0}

    def step():
        for layer in range(layers):
            k = rope(keys[layer], cos, sin)                            # [kv, c+1, d]
            q = rope(queries[layer], cos[c:], sin[c:]).view(kv_heads, group, head_dim)
            probs = torch.softmax((q @ k.transpose(1, 2)).float() / math.sqrt(head_dim), dim=-1)
            probs.to(dtype) @ values[layer]                            # the step's attention output (timed, unused)
            attention = probs.sum(1)                                   # [kv, c+1]: summed over the group
            if policy == "streaming":
                victim = torch.full((kv_heads,), sinks, device=device)
            elif policy == "h2o":
                sums[layer] += attention
                victim = sinks + sums[layer, :, sinks:c + 1 - window].argmin(-1)
            elif policy == "tova":
                current = attention.sum(0)                             # all heads of the layer
                victim = (sinks + current[sinks:c + 1 - window].argmin()).expand(kv_heads)
            else:                                                      # TreeKV, Algorithm 1
                sums[layer] += attention
                counts[layer] += 1
                left = sinks + state["idx"]
                importance = sums[layer, :, left:left + 2] / counts[layer, :, left:left + 2]
                victim = left + (importance[:, 0] > importance[:, 1]).long()
            # The survivors in order, per kv head, without a host round trip: rank r < victim
            # stays at r, the ranks above move down by one.
            order = ranks + (ranks >= victim[:, None]).long()
            for tensor in (keys[layer], values[layer]):
                tensor[:, :c] = tensor.gather(1, order[..., None].expand(-1, -1, head_dim))
            for tensor in (sums[layer], counts[layer]):
                tensor[:, :c] = tensor.gather(1, order)
        if policy == "treekv":
            state["idx"] = (state["idx"] + 1) % span
    return step


def rows(policy):
    return [(f"decode_step_{policy}", f"c={c} layers=32 qh=32 kvh=8 d=128", "f16", {"capacity": c}) for c in (1024, 4096)]
