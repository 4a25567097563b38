"""FreqKV's compression step in PyTorch, the paper's FFT-based formulation (Kai et al., FreqKV,
section 3.3 eq. 3, appendix A eq. 6/7, appendix F.5): for every layer and kv head, the N - S
states after the S sinks go through the orthonormal DCT-II along the sequence, the lowest
L = floor(gamma * (N - S)) components are kept, the L-point IDCT brings them back, rescaled by
sqrt(L / (N - S)); they replace slots S .. S+L-1 in place. The peer of libkvc's
FreqKvPolicy::compress for kvc-bench (CUDA, PyTorch only).
"""
import math

import torch


def dct2_ortho(x: torch.Tensor, keep: int) -> torch.Tensor:
    """The first `keep` orthonormal DCT-II coefficients of x along dim 1 (eq. 6), through one
    real FFT of the signal zero-padded to 2N: z_t = alpha_t Re(exp(-i pi t / 2N) FFT_2N(x)_t)."""
    n = x.shape[1]
    spectrum = torch.fft.rfft(x, n=2 * n, dim=1)[:, :keep]
    t = torch.arange(keep, device=x.device, dtype=torch.float64)
    twiddle = torch.exp(-1j * math.pi * t / (2 * n)).to(spectrum.dtype)
    alpha = torch.full((keep,), math.sqrt(2.0 / n), device=x.device, dtype=x.dtype)
    alpha[0] = math.sqrt(1.0 / n)
    return (spectrum * twiddle[None, :, None]).real * alpha[None, :, None]


def idct_ortho(z: torch.Tensor) -> torch.Tensor:
    """The orthonormal DCT-III (eq. 7) of z along dim 1, through one complex inverse FFT of
    length 2L: x_n = Re(sum_t alpha_t z_t exp(i pi t (2n + 1) / 2L))."""
    n = z.shape[1]
    t = torch.arange(n, device=z.device, dtype=torch.float64)
    alpha = torch.full((n,), math.sqrt(2.0 / n), device=z.device, dtype=z.dtype)
    alpha[0] = math.sqrt(1.0 / n)
    weighted = (z * alpha[None, :, None]) * torch.exp(1j * math.pi * t / (2 * n)).to(torch.complex64)[None, :, None]
    return torch.fft.ifft(weighted, n=2 * n, dim=1)[:, :n].real * (2 * n)


# kvc-bench's freqkv_compress rows: (name, shape, dtype, make_step arguments).
ROWS = [("freqkv_compress", "layers=32 kvh=8 N=4096 S=4 d=128 fft", dtype, {}) for dtype in ("f16", "f32")] + [
    ("freqkv_compress", "layers=32 kvh=8 N=2048 S=4 d=128 chirp", dtype, {"window": 2048}) for dtype in ("f16", "f32")]


def make_step(device, dtype, layers=32, kv_heads=8, window=4096, sinks=4, head_dim=128, retain_ratio=0.5):
    """One compression of a full FreqKV cache (K or V of every layer and kv head, laid out
    [layers * kv_heads][window][head_dim] as libkvc stores it), in place."""
    compressed = window - sinks
    retained = int(math.floor(retain_ratio * compressed))
    states = torch.randn(layers * kv_heads, window, head_dim, device=device, dtype=dtype)

    def step():
        x = states[:, sinks:, :].float()
        kept = dct2_ortho(x, retained)
        states[:, sinks:sinks + retained, :] = (idct_ortho(kept) * math.sqrt(retained / compressed)).to(dtype)

    return step
