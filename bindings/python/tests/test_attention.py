"""FULL-policy attention through the bindings against the NumPy reference (conftest.py), over a
grid of shapes and both dtypes, on each backend; arrays in and out as NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import kvc
from conftest import reference_attention

# f32 differs from the float64 reference by accumulation order only (~1e-6 of the output scale);
# f16 storage rounds every input to 11 significant bits (2^-11 ~ 5e-4 relative), and the
# output is rounded to f16 again.
TOLERANCE = {kvc.DType.F32: 1e-4, kvc.DType.F16: 4e-3}


@pytest.mark.parametrize("dtype", [kvc.DType.F32, kvc.DType.F16], ids=["f32", "f16"])
@pytest.mark.parametrize("q_heads,kv_heads,head_dim", [(4, 4, 16), (8, 2, 64), (6, 1, 128)])
@pytest.mark.parametrize("chunks", [(1,), (7, 1, 1), (33, 5, 1)], ids=["decode", "prefill7", "prefill33"])
def test_attention_matches_reference(context, rng, dtype, q_heads, kv_heads, head_dim, chunks):
    layers = 2
    with kvc.Cache(context, layers=layers, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim, capacity=64,
                   dtype=dtype) as cache:
        keys = [np.empty((0, kv_heads, head_dim), dtype.numpy) for _ in range(layers)]
        values = [np.empty((0, kv_heads, head_dim), dtype.numpy) for _ in range(layers)]
        for n in chunks:
            for layer in range(layers):
                k = rng.standard_normal((n, kv_heads, head_dim)).astype(dtype.numpy)
                v = rng.standard_normal((n, kv_heads, head_dim)).astype(dtype.numpy)
                q = rng.standard_normal((n, q_heads, head_dim)).astype(dtype.numpy)
                cache.append(layer, k, v)
                slots_before = len(keys[layer])
                keys[layer] = np.concatenate([keys[layer], k])
                values[layer] = np.concatenate([values[layer], v])
                out, scores = cache.attend(layer, q, scores=True)
                expected, expected_scores = reference_attention(q, keys[layer], values[layer], slots_before)
                assert out.dtype == dtype.numpy and out.shape == q.shape
                scale = np.abs(expected).max()
                assert np.abs(out - expected).max() <= TOLERANCE[dtype] * scale
                assert np.abs(scores - expected_scores).max() <= TOLERANCE[dtype] * n * q_heads / kv_heads
        for layer in range(layers):
            k, v, positions = cache.read(layer)
            np.testing.assert_array_equal(k, keys[layer].transpose(1, 0, 2))
            np.testing.assert_array_equal(v, values[layer].transpose(1, 0, 2))
            np.testing.assert_array_equal(positions, np.tile(np.arange(sum(chunks)), (kv_heads, 1)))
        stats = cache.stats
        assert stats.tokens_seen == stats.slots_held == layers * sum(chunks)
        assert stats.compressions == 0


def test_out_array_and_batch_dimension(context, rng):
    """attend() writes into a given array in place, and a leading batch dimension of 1 is accepted."""
    with kvc.Cache(context, layers=1, q_heads=4, kv_heads=2, head_dim=32, capacity=16) as cache:
        k = rng.standard_normal((1, 3, 2, 32)).astype(np.float32)
        cache.append(0, k, k)
        q = rng.standard_normal((1, 3, 4, 32)).astype(np.float32)
        out = np.full((1, 3, 4, 32), np.nan, np.float32)
        returned = cache.attend(0, q, out=out)
        assert returned is out and np.isfinite(out).all()
        expected, _ = reference_attention(q[0], k[0], k[0], 0)
        assert np.abs(out[0] - expected).max() <= TOLERANCE[kvc.DType.F32] * np.abs(expected).max()
