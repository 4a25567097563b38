"""FourierAttention in PyTorch, the paper's formulation (Liu et al., "Beyond Homogeneous
Attention: Memory-Efficient LLMs via Fourier-Approximated KV Cache", sec. 3.3-3.4, appendix C-D):
the peer of libkvc's KVC_POLICY_FOURIER for kvc-bench (CUDA, PyTorch only), at sec. 4.1's
setting (4 initial and 1024 local tokens, N = 512, the inverted pyramid; T the context).

- compress: per layer, the middle's K and V go through one real FFT along the sequence,
  zero-padded to T (eq. 4's rows are its first N bins: C = (1/T) F X), every dim is rebuilt
  (F^T C) and standardized (appendix D: mean and standard deviation matched to the original),
  and per kv head the dims with the least squared error are kept compressed (sec. 3.4); the
  others are packed.
- decode step: per layer, the token leaving the local window is folded in (eq. 6), the middle
  is decompressed (eq. 5: F^T C, standardized, scattered beside the packed dims), concatenated
  with the initial and local tokens, and attended with scaled_dot_product_attention.
- full decode step: scaled_dot_product_attention over L tokens per layer, for the ratio.
"""
import math

import torch
import torch.nn.functional as F

SHAPE = "layers=32 qh=32 kvh=8 d=128 L=32768 N=512 local=1024"
ROWS = [
    ("fourier_compress", SHAPE, "f16", {"what": "compress", "heavy": True}),
    ("fourier_decode_step", SHAPE, "f16", {"what": "decode"}),
    ("full_decode_step", "layers=32 qh=32 kvh=8 d=128 L=32768", "f16", {"what": "full"}),
]


def pyramid_dims(layer, layers, head_dim):
    """Sec. 4.1's inverted pyramid, the last 8 layers' rule first (the authors' code order)."""
    if layer + 8 >= layers:
        ratios = (0.5, 0.7)
    elif layer < 4:
        ratios = (0.9, 0.95)
    else:
        ratios = (0.8, 0.8)
    return tuple(min(max(round(r * head_dim), 1), head_dim - 1) for r in ratios)


def basis(length, states, window, device, first=0):
    """F^T of eq. 4: [length, 2N], columns cos and sin of 2 pi n t / T interleaved (angles reduced
    exactly, (n t) mod T in integers)."""
    t = torch.arange(first, first + length, device=device, dtype=torch.int64)[:, None]
    n = torch.arange(states, device=device, dtype=torch.int64)[None, :]
    angle = (n * t % window).double() * (2 * math.pi / window)
    return torch.stack((torch.cos(angle), torch.sin(angle)), dim=2).reshape(length, 2 * states).float()


def compress_middle(x, states, window, compressed):
    """Sec. 3.3-3.4 on one layer's middle x [kv, M, d]: coefficients [kv, 2N, c] (f32), affine
    (scale, offset) [kv, c], the kept dims packed [kv, M, d - c], and the dims chosen [kv, d]."""
    kv, length, dim = x.shape
    xf = x.float()
    spectrum = torch.fft.rfft(xf, n=window, dim=1)[:, :states] / window         # (1/T) sum x e^{-i w n t}
    coefficients = torch.stack((spectrum.real, -spectrum.imag), dim=2).reshape(kv, 2 * states, dim)
    rebuilt = torch.matmul(basis(length, states, window, x.device), coefficients)  # F^T C, [kv, M, d]
    mean_x, mean_r = xf.mean(dim=1), rebuilt.mean(dim=1)
    std_x, std_r = xf.std(dim=1, unbiased=False), rebuilt.std(dim=1, unbiased=False)
    scale = torch.where(std_r > 0, std_x / std_r, torch.zeros_like(std_r))
    offset = mean_x - scale * mean_r
    error = ((rebuilt * scale[:, None, :] + offset[:, None, :] - xf) ** 2).mean(dim=1)
    order = torch.argsort(error, dim=1, stable=True)
    chosen = torch.sort(order[:, :compressed], dim=1).values
    kept = torch.sort(order[:, compressed:], dim=1).values
    dims = torch.cat((chosen, kept), dim=1)
    state = {
        "coefficients": torch.gather(coefficients, 2, chosen[:, None, :].expand(kv, 2 * states, compressed)),
        "scale": torch.gather(scale, 1, chosen),
        "offset": torch.gather(offset, 1, chosen),
        "packed": torch.gather(x, 2, kept[:, None, :].expand(kv, length, dim - compressed)),
        "chosen": chosen,
        "kept": kept,
    }
    return state, dims


def make_step(device, dtype, what, layers=32, q_heads=32, kv_heads=8, head_dim=128, length=32768, states=512, local=1024,
              sinks=4):
    window = length
    middle = length - sinks - local
    if what == "full":
        q = torch.rand(1, q_heads, 1, head_dim, device=device, dtype=dtype) * 2 - 1
        k = torch.rand(1, kv_heads, length, head_dim, device=device, dtype=dtype) * 2 - 1
        v = torch.rand_like(k)
        return lambda: [F.scaled_dot_product_attention(q, k, v, enable_gqa=True) for _ in range(layers)]

    if what == "compress":
        k = torch.rand(kv_heads, middle, head_dim, device=device, dtype=dtype) * 2 - 1
        v = torch.rand_like(k)
        counts = [pyramid_dims(layer, layers, head_dim) for layer in range(layers)]
        return lambda: [(compress_middle(k, states, window, kc), compress_middle(v, states, window, vc)) for kc, vc in counts]

    # decode: one compressed state per distinct pair of counts, shared by the layers that have it.
    states_by_counts = {}
    for layer in range(layers):
        counts = pyramid_dims(layer, layers, head_dim)
        if counts not in states_by_counts:
            x = torch.rand(2, kv_heads, middle, head_dim, device=device, dtype=dtype) * 2 - 1
            key, _ = compress_middle(x[0], states, window, counts[0])
            value, _ = compress_middle(x[1], states, window, counts[1])
            for part in (key, value):  # room for the token folded in
                part["packed"] = torch.cat((part["packed"], part["packed"][:, :1]), dim=1)
            states_by_counts[counts] = (key, value)
    f_transposed = basis(middle + 1, states, window, device)  # F^T over the middle after the fold
    leaving_column = f_transposed[middle]                    # f of eq. 6 for middle index M
    init = torch.rand(2, kv_heads, sinks, head_dim, device=device, dtype=dtype) * 2 - 1
    recent = torch.rand(2, kv_heads, local, head_dim, device=device, dtype=dtype) * 2 - 1
    q = torch.rand(1, q_heads, 1, head_dim, device=device, dtype=dtype) * 2 - 1

    def decompress(part):
        """Eq. 5 with appendix D: the middle as attention reads it, [kv, M + 1, d]."""
        rebuilt = torch.matmul(f_transposed, part["coefficients"]) * part["scale"][:, None, :] + part["offset"][:, None, :]
        rows = torch.empty(kv_heads, middle + 1, head_dim, device=device, dtype=dtype)
        c, u = part["chosen"].shape[1], part["kept"].shape[1]
        rows.scatter_(2, part["chosen"][:, None, :].expand(kv_heads, middle + 1, c), rebuilt.to(dtype))
        rows.scatter_(2, part["kept"][:, None, :].expand(kv_heads, middle + 1, u), part["packed"])
        return rows

    def fold(part, token):
        """Eq. 6: the leaving token's compressed dims into C, its other dims packed after the middle."""
        part["coefficients"] += leaving_column[None, :, None] * torch.gather(token, 1, part["chosen"]).float()[:, None, :] / window
        part["packed"][:, middle] = torch.gather(token, 1, part["kept"])

    def step():
        for layer in range(layers):
            key, value = states_by_counts[pyramid_dims(layer, layers, head_dim)]
            fold(key, recent[0][:, 0])
            fold(value, recent[1][:, 0])
            k = torch.cat((init[0], decompress(key), recent[0]), dim=1)[None]
            v = torch.cat((init[1], decompress(value), recent[1]), dim=1)[None]
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    return step
