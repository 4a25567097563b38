"""FAEDKV in PyTorch, the paper's formulation (Li et al., FAEDKV, sec. 4.2): the prompt's middle
segment of M = N - S - R tokens goes through torch.fft along the sequence and only the kept bins
stay (eq. 10, pruned by eq. 6); every decode step folds the token leaving the recent window into
the kept bins (IWDFT, eq. 9), rebuilds the segment by an inverse FFT of the pruned spectrum
(eq. 11) and attends over [sinks, rebuilt segment, window] (eq. 13) with SDPA. The peer of
kvc-bench's FAEDKV rows (32 layers, 32 q / 8 kv heads, d = 128, f16, S = 10, R = 50, C = 22,
r = 0.125: chunks 0, 21 and 1). The shapes carry kvc-bench's: the decode step pairs with its
"step" row, the transform with its end-of-prompt row. CUDA, PyTorch only.
"""
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

SINKS, RECENT, CHUNKS, LAYERS, Q_HEADS, KV_HEADS, DIM = 10, 50, 22, 32, 32, 8, 128


def kept_bins(segment, device):
    """The bins of chunks 0, C - 1 and 1 (the lowest frequencies), with their mirrors."""
    bins = set()
    for chunk in (0, CHUNKS - 1, 1):
        for k in range(chunk * segment // CHUNKS, (chunk + 1) * segment // CHUNKS):
            bins.update((k, (segment - k) % segment))
    return torch.tensor(sorted(bins), device=device)


def shape(length, n, path):
    return f"faedkv L={length} n={n} layers={LAYERS} qh={Q_HEADS} kvh={KV_HEADS} d={DIM} {path}"


ROWS = [("engine_decode", shape(32768, 1, "step"), "f16", {"length": 32768, "decode": True}),
        ("engine_end_prefill", shape(32768, 0, "device"), "f16", {"length": 32768, "decode": False})]


def make_step(device, dtype, length, decode):
    segment = length - 1 - SINKS - RECENT  # kvc-bench's decode cache: a prompt of L - 1 tokens
    if not decode:
        segment = length - SINKS - RECENT
    bins = kept_bins(segment, device)
    random = lambda *s: torch.empty(*s, device=device, dtype=dtype).uniform_(-1, 1)
    if not decode:
        k = [random(KV_HEADS, length, DIM) for _ in range(LAYERS)]
        v = [random(KV_HEADS, length, DIM) for _ in range(LAYERS)]

        def transform():
            for layer in range(LAYERS):
                for states in (k[layer], v[layer]):
                    middle = states[:, SINKS:SINKS + segment].float()
                    torch.fft.fft(middle, dim=1)[:, bins] / segment
        return transform

    # Per layer: sinks and window as tokens, the kept bins as a running mean (complex64).
    sinks_k = [random(1, KV_HEADS, SINKS, DIM) for _ in range(LAYERS)]
    sinks_v = [random(1, KV_HEADS, SINKS, DIM) for _ in range(LAYERS)]
    window_k = [random(1, KV_HEADS, RECENT, DIM) for _ in range(LAYERS)]
    window_v = [random(1, KV_HEADS, RECENT, DIM) for _ in range(LAYERS)]
    state_k = [torch.randn(KV_HEADS, len(bins), DIM, device=device, dtype=torch.complex64) for _ in range(LAYERS)]
    state_v = [torch.randn(KV_HEADS, len(bins), DIM, device=device, dtype=torch.complex64) for _ in range(LAYERS)]
    twiddle = torch.exp(2j * math.pi * bins.double() / segment).to(torch.complex64)[None, :, None]
    q, k_new, v_new = random(1, Q_HEADS, 1, DIM), random(1, KV_HEADS, 1, DIM), random(1, KV_HEADS, 1, DIM)
    folded = [segment]

    def token():
        n = folded[0]
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            for layer in range(LAYERS):
                # eq. 9 for the window's oldest token, then the new one enters the window.
                for state, window, new in ((state_k, window_k, k_new), (state_v, window_v, v_new)):
                    leaving = window[layer][0, :, 0].float()[:, None, :]
                    state[layer] = twiddle * (state[layer] * (n / (n + 1)) + leaving / (n + 1))
                    window[layer] = torch.cat([window[layer][:, :, 1:], new], dim=2)
                # eq. 11: the segment rebuilt from the pruned spectrum (zero elsewhere).
                rebuilt = []
                for state in (state_k[layer], state_v[layer]):
                    full = torch.zeros(KV_HEADS, segment, DIM, device=device, dtype=torch.complex64)
                    full[:, bins] = state
                    rebuilt.append((torch.fft.ifft(full, dim=1).real * segment).to(dtype)[None])
                keys = torch.cat([sinks_k[layer], rebuilt[0], window_k[layer]], dim=2)
                values = torch.cat([sinks_v[layer], rebuilt[1], window_v[layer]], dim=2)
                F.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
        folded[0] += 1
    return token
