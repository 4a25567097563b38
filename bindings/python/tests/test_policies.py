"""Every policy through the bindings: the same token stream (a prompt in chunks, then decode
steps) on the Vulkan backend and on the CPU reference gives the same outputs and the same
cache, and the compressing policies hold their budgets."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import kvc

LAYERS, Q_HEADS, KV_HEADS, HEAD_DIM = 2, 4, 2, 32
PROMPT_CHUNKS, DECODE_STEPS = (32, 32, 32), 40
PROMPT = sum(PROMPT_CHUNKS)
EVICTION_CAPACITY, WINDOW_BUDGET, FREQKV_WINDOW = 64, 48, 128

# Per policy: (capacity, parameters, whether the prompt ends with end_prefill, slots each layer
# holds at the end). A policy added to kvc.Policy needs a row here (test_every_policy_has_a_setup).
_EVICTION = kvc.EvictionParams(chunk_slots=max(PROMPT_CHUNKS))
_WINDOW = kvc.WindowParams(budget=WINDOW_BUDGET, window=16)
SETUPS = {
    kvc.Policy.FULL: (PROMPT + DECODE_STEPS, None, PROMPT + DECODE_STEPS),
    kvc.Policy.STREAMING: (EVICTION_CAPACITY, _EVICTION, EVICTION_CAPACITY),
    kvc.Policy.H2O: (EVICTION_CAPACITY, _EVICTION, EVICTION_CAPACITY),
    kvc.Policy.TOVA: (EVICTION_CAPACITY, _EVICTION, EVICTION_CAPACITY),
    kvc.Policy.TREEKV: (EVICTION_CAPACITY, _EVICTION, EVICTION_CAPACITY),
    kvc.Policy.SNAPKV: (PROMPT + DECODE_STEPS, _WINDOW, WINDOW_BUDGET + DECODE_STEPS),
    # PYRAMIDKV and PHITKV: the budget is the layers' average, so check the sum over layers.
    kvc.Policy.PYRAMIDKV: (PROMPT + DECODE_STEPS, _WINDOW, WINDOW_BUDGET + DECODE_STEPS),
    kvc.Policy.HITKV: (PROMPT + DECODE_STEPS, _WINDOW, WINDOW_BUDGET + DECODE_STEPS),
    kvc.Policy.PHITKV: (PROMPT + DECODE_STEPS, _WINDOW, WINDOW_BUDGET + DECODE_STEPS),
    # FreqKV compresses the 124 slots after 4 sinks to 62 whenever a layer holds N = 128.
    kvc.Policy.FREQKV: (FREQKV_WINDOW, kvc.FreqKVParams(), None),
    # FAEDKV: attention sees the 4 sinks, the 76-token middle rebuilt from 2 of 8 DFT chunks, and
    # the 16 newest tokens; it stores the sinks, the window and a spare slot (STORED_SLOTS).
    kvc.Policy.FAEDKV: (PROMPT, kvc.FaedKVParams(sinks=4, recent_window=16, chunks=8, retain_ratio=0.25), PROMPT),
    # FOURIER (capacity holds prompt and decode): end_prefill compresses each layer (96 > 2 + 2*4 + 8 tokens) into
    # 2 sinks, a middle whose chosen dims are 2*4 coefficients and grows by each decode token, and the 8 newest
    # tokens; attention sees all 136 tokens, it stores the sinks and the window as slots (STORED_SLOTS).
    kvc.Policy.FOURIER: (PROMPT + DECODE_STEPS,
                         kvc.FourierParams(sinks=2, local_window=8, num_states=4, window_length=PROMPT + DECODE_STEPS),
                         PROMPT + DECODE_STEPS),
}
ENDS_PREFILL = {kvc.Policy.SNAPKV, kvc.Policy.PYRAMIDKV, kvc.Policy.HITKV, kvc.Policy.PHITKV, kvc.Policy.FAEDKV,
                kvc.Policy.FOURIER}
# stats.slots_held where it is not the slots attention sees
# (FAEDKV: its sinks, its window and the slot of the token that left the window last, which the
# next attention folds into the bins)
STORED_SLOTS = {kvc.Policy.FAEDKV: LAYERS * (4 + 16 + 1), kvc.Policy.FOURIER: LAYERS * (2 + 8)}
ROTATED_KEYS = {kvc.Policy.FAEDKV, kvc.Policy.FOURIER}  # policies that refuse libkvc's RoPE: keys arrive rotated


def test_every_policy_has_a_setup():
    assert set(SETUPS) == set(kvc.Policy)


def _stream(context, policy, rng_seed):
    """Runs the stream under `policy`; returns every attention output, the caches' contents and the stats."""
    capacity, params, _ = SETUPS[policy]
    rng = np.random.default_rng(rng_seed)
    outputs = []
    with kvc.Cache(context, layers=LAYERS, q_heads=Q_HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, capacity=capacity,
                   policy=policy, params=params,
                   rope=kvc.RopeStyle.NONE if policy in ROTATED_KEYS else kvc.RopeStyle.NEOX) as cache:
        for step, n in enumerate(PROMPT_CHUNKS + (1,) * DECODE_STEPS):
            if step == len(PROMPT_CHUNKS) and policy in ENDS_PREFILL:
                cache.end_prefill()
            for layer in range(LAYERS):
                k, v = (rng.standard_normal((n, KV_HEADS, HEAD_DIM)).astype(np.float32) for _ in range(2))
                cache.append(layer, k, v)
                outputs.append(cache.attend(layer, rng.standard_normal((n, Q_HEADS, HEAD_DIM)).astype(np.float32)))
        contents = [cache.read(layer) for layer in range(LAYERS)]
        return outputs, contents, cache.stats, [cache.layer_slots(layer) for layer in range(LAYERS)]


@pytest.mark.parametrize("policy", list(kvc.Policy), ids=lambda p: p.name)
def test_policy_on_vulkan_matches_cpu_reference(vulkan_context, rng, policy):
    seed = int(rng.integers(2**31))
    with kvc.Context(backend=kvc.Backend.CPU) as cpu:
        expected_outputs, expected_contents, expected_stats, expected_slots = _stream(cpu, policy, seed)
    outputs, contents, stats, slots = _stream(vulkan_context, policy, seed)
    # The demo's bound: lavapipe and the CPU reference agree within 1e-4 of the output scale.
    for out, expected in zip(outputs, expected_outputs):
        assert np.abs(out - expected).max() <= 1e-4 * np.abs(expected).max()
    assert slots == expected_slots
    # device_bytes_held is the backend's own memory (FAEDKV's Vulkan path holds FFT buffers the
    # CPU reference does not); every counter must agree.
    assert dataclasses.replace(stats, device_bytes_held=0) == dataclasses.replace(expected_stats, device_bytes_held=0)
    for (k, v, positions), (k_ref, v_ref, positions_ref) in zip(contents, expected_contents):
        # Slots come back in no particular order under eviction: compare them sorted by position.
        for head in range(KV_HEADS):
            order, order_ref = np.argsort(positions[head]), np.argsort(positions_ref[head])
            np.testing.assert_array_equal(positions[head][order], positions_ref[head][order_ref])
            # Stored slots are copies (exact up to f32 RoPE-free storage); FAEDKV rebuilds its middle
            # from the kept bins, by VkFFT in f32 on the device and by the formula in double on the CPU.
            np.testing.assert_allclose(k[head][order], k_ref[head][order_ref], rtol=0, atol=1e-4)
            np.testing.assert_allclose(v[head][order], v_ref[head][order_ref], rtol=0, atol=1e-4)


@pytest.mark.parametrize("policy", list(kvc.Policy), ids=lambda p: p.name)
def test_policy_holds_its_budget(context, rng, policy):
    _, contents, stats, slots = _stream(context, policy, int(rng.integers(2**31)))
    capacity, _, held = SETUPS[policy]
    assert stats.tokens_seen == LAYERS * (PROMPT + DECODE_STEPS)
    assert stats.slots_held == STORED_SLOTS.get(policy, sum(slots))
    if policy in (kvc.Policy.PYRAMIDKV, kvc.Policy.PHITKV):
        assert sum(slots) == LAYERS * held
    elif held is not None:
        assert slots == [held] * LAYERS
    else:
        assert all(s <= capacity for s in slots)
    if policy != kvc.Policy.FULL:
        assert stats.slots_held < stats.tokens_seen and stats.compressions > 0
    for (k, v, positions), s in zip(contents, slots):
        assert k.shape == v.shape == (KV_HEADS, s, HEAD_DIM) and positions.shape == (KV_HEADS, s)
        assert np.isfinite(k).all() and np.isfinite(v).all()


def test_per_layer_tables(context, rng):
    """Table parameters (EvictionParams.layer_capacities, WindowParams.layer_budgets) reach libkvc."""
    k = rng.standard_normal((64, KV_HEADS, HEAD_DIM)).astype(np.float32)
    q = rng.standard_normal((64, Q_HEADS, HEAD_DIM)).astype(np.float32)
    with kvc.Cache(context, layers=2, q_heads=Q_HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, capacity=48,
                   policy=kvc.Policy.H2O, params=kvc.EvictionParams(chunk_slots=64, layer_capacities=[40, 24])) as cache:
        for layer in range(2):
            cache.append(layer, k, k)
            cache.attend(layer, q)
        assert [cache.layer_slots(layer) for layer in range(2)] == [40, 24]
    with kvc.Cache(context, layers=2, q_heads=Q_HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, capacity=64,
                   policy=kvc.Policy.PYRAMIDKV, params=kvc.WindowParams(budget=25, window=8, layer_budgets=[30, 20])) as cache:
        for layer in range(2):
            cache.append(layer, k, k)
            cache.attend(layer, q)
        cache.end_prefill()
        assert [cache.layer_slots(layer) for layer in range(2)] == [30, 20]


def _freqkv_compression(x: np.ndarray, retained: int) -> np.ndarray:
    """FreqKV eq. 3 along axis 0: sqrt(L / M) * IDCT_L(DCT_M(x)[:L]), orthonormal DCTs as matrices."""
    def dct_matrix(length: int) -> np.ndarray:  # row t: alpha_t cos(pi t (2n + 1) / 2 length)
        t, n = np.arange(length)[:, None], np.arange(length)[None, :]
        matrix = np.sqrt(2.0 / length) * np.cos(np.pi * t * (2 * n + 1) / (2 * length))
        matrix[0] /= np.sqrt(2.0)
        return matrix
    length = x.shape[0]
    return np.sqrt(retained / length) * dct_matrix(retained).T @ (dct_matrix(length) @ x)[:retained]


def test_freqkv_recent_tokens_stay_whole(context, rng):
    """FreqKVParams.recent_tokens reaches libkvc: a full window keeps its sinks and its last
    recent_tokens slots as appended, the recent ones right after the compressed middle."""
    window, sinks, recent = 40, 2, 5
    middle = window - sinks - recent  # 33
    retained = middle // 2  # floor(0.5 * 33)
    k, v = (rng.standard_normal((window, KV_HEADS, HEAD_DIM)).astype(np.float32) for _ in range(2))
    with kvc.Cache(context, layers=1, q_heads=Q_HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM, capacity=window,
                   policy=kvc.Policy.FREQKV,
                   params=kvc.FreqKVParams(sink_tokens=sinks, retain_ratio=0.5, recent_tokens=recent)) as cache:
        cache.append(0, k, v)
        cache.attend(0, rng.standard_normal((window, Q_HEADS, HEAD_DIM)).astype(np.float32))
        got_k, got_v, positions = cache.read(0)
    assert got_k.shape[1] == sinks + retained + recent
    np.testing.assert_array_equal(positions, np.tile(np.arange(sinks + retained + recent), (KV_HEADS, 1)))
    for got, appended in ((got_k, k), (got_v, v)):
        by_head = appended.transpose(1, 0, 2)  # [kv_heads, tokens, head_dim], as read() returns
        np.testing.assert_array_equal(got[:, :sinks], by_head[:, :sinks])
        np.testing.assert_array_equal(got[:, sinks + retained:], by_head[:, window - recent:])
        for head in range(KV_HEADS):
            expected = _freqkv_compression(by_head[head, sinks:window - recent].astype(np.float64), retained)
            # f32 storage and f32 sums on the device: ~1e-6 of the scale; 1e-5 leaves room, and a
            # wrong middle (recent tokens transformed, or a shifted range) is off by O(1).
            np.testing.assert_allclose(got[head, sinks:sinks + retained], expected, rtol=0, atol=1e-5 * np.abs(expected).max())


def test_faedkv_ablate_prunes_one_chunk_and_its_mirrors(context, rng):
    """Cache.faedkv_ablate (kvc_faedkv_ablate, FAEDKV's eq. 6) against NumPy's FFT: the middle
    rebuilt without the chunk's bins and their mirrors; sinks and window returned unchanged."""
    tokens, heads, dim = 97, 2, 8
    params = kvc.FaedKVParams(sinks=3, recent_window=5, chunks=7)
    with kvc.Cache(context, layers=1, q_heads=heads, kv_heads=heads, head_dim=dim, capacity=128) as cache:
        k = rng.standard_normal((tokens, heads, dim), dtype=np.float32)
        v = rng.standard_normal((tokens, heads, dim), dtype=np.float32)
        cache.append(0, k, v)
        for pruned in (0, 2, 6):
            ablated = cache.faedkv_ablate(0, pruned, params)
            middle = tokens - 8
            folded = {min(b, middle - b) for b in range(pruned * middle // 7, (pruned + 1) * middle // 7)}
            zeroed = np.array([min(b, middle - b) in folded for b in range(middle)])
            for given, got in zip((k, v), ablated):
                rows = given.transpose(1, 0, 2)  # [heads, tokens, dim], as read() returns
                spectrum = np.fft.fft(rows[:, 3:3 + middle].astype(np.float64), axis=1)
                spectrum[:, zeroed] = 0
                expected = np.fft.ifft(spectrum, axis=1).real
                np.testing.assert_allclose(got[:, 3:3 + middle], expected, atol=1e-5)
                np.testing.assert_array_equal(got[:, :3], rows[:, :3])
                np.testing.assert_array_equal(got[:, 3 + middle:], rows[:, 3 + middle:])
