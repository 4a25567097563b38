"""The device-resident path (kvc.Buffer, append_device / attend_device) and one-submission steps
(step_begin / step_end / step_wait) give what the host path gives; PyTorch CPU tensors cross
without a copy."""
from __future__ import annotations

import numpy as np
import pytest

import kvc
from conftest import require_module

LAYERS, Q_HEADS, KV_HEADS, HEAD_DIM, CAPACITY = 3, 8, 2, 32, 64


def _aligned(nbytes, alignment):
    return (nbytes + alignment - 1) // alignment * alignment


def _new_cache(context, policy=kvc.Policy.FULL):
    return kvc.Cache(context, layers=LAYERS, q_heads=Q_HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, capacity=CAPACITY,
                     policy=policy, params=kvc.EvictionParams(chunk_slots=8) if policy != kvc.Policy.FULL else None)


@pytest.mark.parametrize("policy", [kvc.Policy.FULL, kvc.Policy.H2O], ids=lambda p: p.name)
def test_device_steps_match_host_calls(context, rng, policy):
    alignment = context.info.buffer_offset_alignment
    kv_stride = _aligned(8 * KV_HEADS * HEAD_DIM * 4, alignment)
    q_stride = _aligned(8 * Q_HEADS * HEAD_DIM * 4, alignment)
    with _new_cache(context, policy) as device_cache, _new_cache(context, policy) as host_cache, \
            context.buffer(LAYERS * kv_stride) as k_buffer, context.buffer(LAYERS * kv_stride) as v_buffer, \
            context.buffer(LAYERS * q_stride) as q_buffer, context.buffer(LAYERS * q_stride) as out_buffer, \
            context.buffer(LAYERS * q_stride) as score_buffer:
        assert k_buffer.nbytes == LAYERS * kv_stride
        for n in (8, 8, 1, 1, 1):
            k, v = (rng.standard_normal((LAYERS, n, KV_HEADS, HEAD_DIM)).astype(np.float32) for _ in range(2))
            q = rng.standard_normal((LAYERS, n, Q_HEADS, HEAD_DIM)).astype(np.float32)
            out = np.full((LAYERS, n, Q_HEADS, HEAD_DIM), np.nan, np.float32)
            slots = [device_cache.layer_slots(layer) + n for layer in range(LAYERS)]
            scores = [np.full((KV_HEADS, s), np.nan, np.float32) for s in slots]
            context.step_begin()
            for layer in range(LAYERS):
                k_buffer.write(layer * kv_stride, k[layer])
                v_buffer.write(layer * kv_stride, v[layer])
                q_buffer.write(layer * q_stride, q[layer])
                device_cache.append_device(layer, n, k_buffer.view(layer * kv_stride), v_buffer.view(layer * kv_stride))
                device_cache.attend_device(layer, n, q_buffer.view(layer * q_stride), out_buffer.view(layer * q_stride),
                                           score_buffer.view(layer * q_stride))
                out_buffer.read(layer * q_stride, out[layer])
                score_buffer.read(layer * q_stride, scores[layer])
            context.step_end()
            while not context.step_wait(0):
                pass
            for layer in range(LAYERS):
                host_cache.append(layer, k[layer], v[layer])
                expected, expected_scores = host_cache.attend(layer, q[layer], scores=True)
                # Same backend, same kernels: the two paths differ in where the data lives only.
                np.testing.assert_allclose(out[layer], expected, rtol=0, atol=1e-6)
                np.testing.assert_allclose(scores[layer], expected_scores, rtol=0, atol=1e-6)
        assert device_cache.stats == host_cache.stats


@pytest.mark.parametrize("policy", [kvc.Policy.FULL, kvc.Policy.H2O], ids=lambda p: p.name)
def test_decode_device_matches_append_then_attend(context, rng, policy):
    """decode_device (FULL: the token written inside the attention on Vulkan; H2O: the two calls'
    work) gives what append_device then attend_device give, and leaves the same cache."""
    alignment = context.info.buffer_offset_alignment
    with _new_cache(context, policy) as decoded, _new_cache(context, policy) as twin, \
            context.buffer(4 * _aligned(Q_HEADS * HEAD_DIM * 4, alignment)) as buffer:
        places = [i * _aligned(Q_HEADS * HEAD_DIM * 4, alignment) for i in range(4)]  # k, v, q, out
        k, q, out = buffer.view(places[0]), buffer.view(places[2]), buffer.view(places[3])
        for layer in range(LAYERS):
            prompt = rng.standard_normal((20, KV_HEADS, HEAD_DIM)).astype(np.float32)
            for cache in (decoded, twin):
                cache.append(layer, prompt, prompt)
        for _ in range(3):
            for layer in range(LAYERS):
                buffer.write(places[0], rng.standard_normal((KV_HEADS, HEAD_DIM)).astype(np.float32))
                buffer.write(places[1], rng.standard_normal((KV_HEADS, HEAD_DIM)).astype(np.float32))
                buffer.write(places[2], rng.standard_normal((Q_HEADS, HEAD_DIM)).astype(np.float32))
                twin.append_device(layer, 1, k, buffer.view(places[1]))
                twin.attend_device(layer, 1, q, out)
                expected = np.empty((Q_HEADS, HEAD_DIM), np.float32)
                buffer.read(places[3], expected)
                decoded.decode_device(layer, k, buffer.view(places[1]), q, out)
                got = np.empty((Q_HEADS, HEAD_DIM), np.float32)
                buffer.read(places[3], got)
                # The fused route sums the token as a split of its own: f32 summation order.
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        assert decoded.stats == twin.stats
        for layer in range(LAYERS):
            for got_part, want_part in zip(decoded.read(layer), twin.read(layer)):
                np.testing.assert_array_equal(got_part, want_part)


def test_batch_append_matches_each_cache_alone(context, rng):
    """append_batch_device over FULL and H2O caches of different lengths, in chunks of 3 and 1
    tokens, leaves each cache as its twin fed by append_device, bit for bit; a refused call
    changes no cache."""
    alignment = context.info.buffer_offset_alignment
    kv_stride = _aligned(3 * KV_HEADS * HEAD_DIM * 4, alignment)
    q_stride = _aligned(Q_HEADS * HEAD_DIM * 4, alignment)
    policies = [kvc.Policy.FULL, kvc.Policy.H2O, kvc.Policy.FULL]
    prompts = [1, 20, 37]
    batch = [_new_cache(context, policy) for policy in policies]
    twins = [_new_cache(context, policy) for policy in policies]
    count = len(batch)
    with context.buffer(count * kv_stride) as k_buffer, context.buffer(count * kv_stride) as v_buffer, \
            context.buffer(q_stride) as q_buffer, context.buffer(q_stride) as out_buffer:
        for cache, twin, prompt in zip(batch, twins, prompts):
            for layer in range(LAYERS):
                k = rng.standard_normal((prompt, KV_HEADS, HEAD_DIM)).astype(np.float32)
                for c in (cache, twin):
                    c.append(layer, k, k)
        k_views = [k_buffer.view(i * kv_stride) for i in range(count)]
        v_views = [v_buffer.view(i * kv_stride) for i in range(count)]
        for n in (3, 1, 1):
            for layer in range(LAYERS):
                for i in range(count):
                    k_buffer.write(i * kv_stride, rng.standard_normal((n, KV_HEADS, HEAD_DIM)).astype(np.float32))
                    v_buffer.write(i * kv_stride, rng.standard_normal((n, KV_HEADS, HEAD_DIM)).astype(np.float32))
                context.append_batch_device(batch, layer, n, k_views, v_views)
                for twin, k_view, v_view in zip(twins, k_views, v_views):
                    twin.append_device(layer, n, k_view, v_view)
                q_buffer.write(0, rng.standard_normal((Q_HEADS, HEAD_DIM)).astype(np.float32))
                for cache in batch + twins:  # H2O evicts as it attends
                    cache.attend_device(layer, 1, q_buffer.view(0), out_buffer.view(0))
        for cache, twin in zip(batch, twins):
            assert cache.stats == twin.stats
            for layer in range(LAYERS):
                for got_part, want_part in zip(cache.read(layer), twin.read(layer)):
                    np.testing.assert_array_equal(got_part, want_part)
        # 30 tokens fit caches 0 (6 held of 64) and 1 (H2O: 25 of 64 + 8), not cache 2 (42 of 64):
        # refused after the first two passed every check, with none of them changed.
        before = [[part.copy() for part in cache.read(0)] for cache in batch]
        with context.buffer(30 * KV_HEADS * HEAD_DIM * 4) as chunk, pytest.raises(kvc.CapacityError, match=r"caches\[2\]"):
            context.append_batch_device(batch, 0, 30, [chunk.view(0)] * count, [chunk.view(0)] * count)
        for cache, parts in zip(batch, before):
            for got_part, want_part in zip(cache.read(0), parts):
                np.testing.assert_array_equal(got_part, want_part)
    for cache in batch + twins:
        cache.close()


def test_host_outputs_in_a_step_are_written_at_wait(context, rng):
    with _new_cache(context) as cache:
        with context.step():
            outs = []
            for layer in range(LAYERS):
                k = rng.standard_normal((4, KV_HEADS, HEAD_DIM)).astype(np.float32)
                cache.append(layer, k, k)
                outs.append(cache.attend(layer, rng.standard_normal((4, Q_HEADS, HEAD_DIM)).astype(np.float32)))
        assert all(np.isfinite(out).all() for out in outs)
        with pytest.raises(kvc.BadStateError):
            with context.step():
                cache.read(0)  # refused inside a step
        with pytest.raises(kvc.BadStateError):
            context.step_end()  # no step is open


def test_torch_tensors_cross_without_a_copy(context, rng):
    torch = require_module("torch")
    with kvc.Cache(context, layers=1, q_heads=4, kv_heads=2, head_dim=16, capacity=8, dtype=np.float16) as cache:
        k = torch.from_numpy(rng.standard_normal((3, 2, 16)).astype(np.float16))
        cache.append(0, k, k)
        q = torch.from_numpy(rng.standard_normal((3, 4, 16)).astype(np.float16))
        out = torch.empty(3, 4, 16, dtype=torch.float16)
        returned = cache.attend(0, q, out=out)
        assert returned.ctypes.data == out.data_ptr(), "the output was written into the tensor's memory"
        expected = cache.attend(0, q.numpy())
        np.testing.assert_array_equal(out.numpy(), expected)
        with pytest.raises(kvc.DTypeMismatchError):
            cache.append(0, k.to(torch.bfloat16), k.to(torch.bfloat16))


def test_batch_decode_matches_each_cache_alone(context, rng):
    """attend_batch_device over FULL and H2O caches of different lengths gives what attend_device
    gives cache by cache, and leaves each cache as its twin."""
    alignment = context.info.buffer_offset_alignment
    q_stride = _aligned(Q_HEADS * HEAD_DIM * 4, alignment)
    policies = [kvc.Policy.FULL, kvc.Policy.H2O, kvc.Policy.FULL]
    prompts = [1, 20, 37]
    batch = [_new_cache(context, policy) for policy in policies]
    twins = [_new_cache(context, policy) for policy in policies]
    with context.buffer(len(batch) * q_stride) as q_buffer, context.buffer(len(batch) * q_stride) as out_buffer, \
            context.buffer(len(batch) * q_stride) as twin_buffer:
        for cache, twin, prompt in zip(batch, twins, prompts):
            for layer in range(LAYERS):
                k = rng.standard_normal((prompt, KV_HEADS, HEAD_DIM)).astype(np.float32)
                for c in (cache, twin):
                    c.append(layer, k, k)
        q_views = [q_buffer.view(i * q_stride) for i in range(len(batch))]
        for _ in range(3):
            for layer in range(LAYERS):
                for i, (cache, twin) in enumerate(zip(batch, twins)):
                    k = rng.standard_normal((1, KV_HEADS, HEAD_DIM)).astype(np.float32)
                    cache.append(layer, k, k)
                    twin.append(layer, k, k)
                    q_buffer.write(i * q_stride, rng.standard_normal((Q_HEADS, HEAD_DIM)).astype(np.float32))
                context.attend_batch_device(batch, layer, q_views, [out_buffer.view(i * q_stride) for i in range(len(batch))])
                for i, twin in enumerate(twins):
                    twin.attend_device(layer, 1, q_views[i], twin_buffer.view(i * q_stride))
                got = out_buffer.read(0, np.empty((len(batch), q_stride // 4), np.float32))
                want = twin_buffer.read(0, np.empty_like(got))
                # The batched kernel splits a cache's slots otherwise than one cache's: f32 sums in another order.
                np.testing.assert_allclose(got[:, :Q_HEADS * HEAD_DIM], want[:, :Q_HEADS * HEAD_DIM], rtol=0, atol=1e-5)
        for cache, twin in zip(batch, twins):
            assert cache.stats == twin.stats
            for layer in range(LAYERS):
                for got_part, want_part in zip(cache.read(layer), twin.read(layer)):
                    np.testing.assert_array_equal(got_part, want_part)
        with _new_cache(context) as fresh, pytest.raises(kvc.BadStateError, match=r"caches\[1\]"):
            context.attend_batch_device([batch[0], fresh], 0, q_views[:2], [out_buffer.view(0), out_buffer.view(q_stride)])
    for cache in batch + twins:
        cache.close()
