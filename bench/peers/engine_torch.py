"""kvc-bench's engine rows in PyTorch, for the peer script: what an engine written in PyTorch
waits for per decode token or prefill chunk of a 32-layer model (32 q / 8 kv heads, d = 128, f16)
over a FULL cache, on the wall clock, with one torch.cuda.synchronize() per token or chunk.

PyTorch launches every layer's kernels and waits once, as kvc-bench's step path submits every
layer once per token: the rows carry the shape of kvc-bench's "step" rows, so that
`kvc-bench --compare peer.json` pairs them. Keys arrive rotated here (no RoPE), while libkvc
rotates every cached key by its position in each attend.

Decode runs on PyTorch's flash backend. Left to choose (PyTorch 2.11 on an H100), SDPA took its
cuDNN backend, which took about 1.3 ms per layer whenever the cache length changed (its plans
seem to be kept per length), i.e. at every decode token: 41.7 ms per token at L = 4096, against
0.71 ms for 32 calls at one fixed length. engine_decode_default keeps that row.
"""
import contextlib
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right


def sizes(quick):
    """kvc-bench's sizes (bench/rows_engine.cpp): --quick pairs with `kvc-bench --quick`."""
    return {
        "layers": 2 if quick else 32, "q_heads": 32, "kv_heads": 8, "dim": 128,
        "decode_lengths": [256, 512] if quick else [4096, 32768, 131072],
        "prefill_length": 256 if quick else 32768, "chunk": 32 if quick else 2048,
        "decode_repetitions": 3 if quick else 25, "prefill_repetitions": 3,
        "max_warmup_runs": 64 if quick else 1024,  # as kvc-bench's: the caches have room for them
    }


class Warmup:
    """As kvc-bench's (bench/bench_harness.cpp): the GPU's clocks rise in steps under sustained
    load, so a warm-up goes on until its runs have been no faster (by 2%) for half a second."""
    GAIN, SETTLED_S, LONGEST_S = 0.02, 0.5, 10.0

    def __init__(self):
        self.started = self.faster_at = time.perf_counter()
        self.fastest_us = float("inf")

    def settling(self, run_us):
        now = time.perf_counter()
        if run_us < self.fastest_us * (1 - self.GAIN):
            self.fastest_us, self.faster_at = run_us, now
        return now - self.faster_at < self.SETTLED_S and now - self.started < self.LONGEST_S


def median_wall_us(run, repetitions, max_warmup_runs):
    """As kvc-bench's median_wall_us: runs for at least 200 ms and until they stop getting faster
    (at least one, at most max_warmup_runs), then the median wall-clock time of `repetitions` runs."""
    warm_until, warmup = time.perf_counter() + 0.2, Warmup()
    for _ in range(max_warmup_runs):
        start = time.perf_counter()
        run()
        settling = warmup.settling((time.perf_counter() - start) * 1e6)
        if not settling and time.perf_counter() >= warm_until:
            break
    times = []
    for _ in range(repetitions):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def shape_text(s, length, n):
    return f"full L={length} n={n} layers={s['layers']} qh={s['q_heads']} kvh={s['kv_heads']} d={s['dim']} step"


def bytes_moved(s, length, n):
    """As kvc-bench: per layer K and V of `length` slots read once, n new tokens' K and V written,
    Q read and O written for n queries (f16)."""
    per_layer = 2 * (2 * s["kv_heads"] * length * s["dim"] + 2 * n * s["kv_heads"] * s["dim"]
                     + 2 * n * s["q_heads"] * s["dim"])
    return float(s["layers"] * per_layer)


def random(*shape):
    return torch.empty(*shape, device="cuda", dtype=torch.float16).uniform_(-1, 1)


def inputs(s, n):
    """Q, K and V of n new tokens, as SDPA takes them: [1][heads][n][d]."""
    kv_shape = (1, s["kv_heads"], n, s["dim"])
    return random(1, s["q_heads"], n, s["dim"]), random(*kv_shape), random(*kv_shape)


def flash():
    return sdpa_kernel(SDPBackend.FLASH_ATTENTION)


def decode_preallocated(s, length, repetitions, backend=flash, batch=1, per_sequence=False):
    """One decode token per run into a preallocated [layers][batch][kv_heads][capacity][d] cache:
    the first run makes it hold `length` slots, and each run adds one, as kvc-bench's FULL rows.
    A batch of sequences attends in one batched SDPA call per layer, or with per_sequence in one
    call per sequence (kvc-bench's engine_decode_batch "batch" and "per_cache")."""
    capacity = length + s["max_warmup_runs"] + repetitions
    k_cache = random(s["layers"], batch, s["kv_heads"], capacity, s["dim"])
    v_cache = random(s["layers"], batch, s["kv_heads"], capacity, s["dim"])
    q = random(batch, s["q_heads"], 1, s["dim"])
    k_new, v_new = random(batch, s["kv_heads"], 1, s["dim"]), random(batch, s["kv_heads"], 1, s["dim"])
    held = [length - 1]
    sequences = [slice(b, b + 1) for b in range(batch)] if per_sequence else [slice(0, batch)]

    def token():
        position = held[0]
        with backend():
            for layer in range(s["layers"]):
                k_cache[layer, :, :, position:position + 1] = k_new
                v_cache[layer, :, :, position:position + 1] = v_new
                for rows in sequences:
                    F.scaled_dot_product_attention(q[rows], k_cache[layer, rows, :, :position + 1],
                                                   v_cache[layer, rows, :, :position + 1], enable_gqa=True)
        torch.cuda.synchronize()
        held[0] += 1

    return token


def decode_cat(s, length):
    """One decode token per run, each layer's cache grown by torch.cat (a new tensor per token)."""
    k_caches = [random(1, s["kv_heads"], length - 1, s["dim"]) for _ in range(s["layers"])]
    v_caches = [random(1, s["kv_heads"], length - 1, s["dim"]) for _ in range(s["layers"])]
    q, k_new, v_new = inputs(s, 1)

    def token():
        with flash():
            for layer in range(s["layers"]):
                k_caches[layer] = torch.cat([k_caches[layer], k_new], dim=2)
                v_caches[layer] = torch.cat([v_caches[layer], v_new], dim=2)
                F.scaled_dot_product_attention(q, k_caches[layer], v_caches[layer], enable_gqa=True)
        torch.cuda.synchronize()

    return token


def prefill_chunk(s, length, chunk):
    """A chunk of `chunk` tokens written into the cache's last slots, then attended causally over
    the `length` slots (the mask aligned bottom-right); every run the same chunk."""
    k_cache = random(s["layers"], 1, s["kv_heads"], length, s["dim"])
    v_cache = random(s["layers"], 1, s["kv_heads"], length, s["dim"])
    q, k_new, v_new = inputs(s, chunk)
    mask = causal_lower_right(chunk, length)

    def run():
        for layer in range(s["layers"]):
            k_cache[layer, :, :, length - chunk:] = k_new
            v_cache[layer, :, :, length - chunk:] = v_new
            F.scaled_dot_product_attention(q, k_cache[layer], v_cache[layer], attn_mask=mask, enable_gqa=True)
        torch.cuda.synchronize()

    return run


def row(name, s, length, n, us):
    return {"name": name, "shape": shape_text(s, length, n), "dtype": "f16", "us": us,
            "bytes": bytes_moved(s, length, n)}


def engine_rows(quick, keep=lambda name: True):
    """The engine rows whose name keep() accepts."""
    s = sizes(quick)
    rows = []
    decode_reps = s["decode_repetitions"]
    if keep("engine_decode"):
        for length in s["decode_lengths"]:
            us = median_wall_us(decode_preallocated(s, length, decode_reps), decode_reps, s["max_warmup_runs"])
            rows.append(row("engine_decode", s, length, 1, us))
            torch.cuda.empty_cache()
    if keep("engine_decode_batch"):
        length = s["decode_lengths"][0]
        for batch in (1, 8, 32):
            for per_sequence in (False, True):
                us = median_wall_us(decode_preallocated(s, length, decode_reps, batch=batch, per_sequence=per_sequence),
                                    decode_reps, s["max_warmup_runs"])
                rows.append({"name": "engine_decode_batch", "dtype": "f16", "us": us, "bytes": batch * bytes_moved(s, length, 1),
                             "shape": shape_text(s, length, 1) + f" B={batch} " + ("per_cache" if per_sequence else "batch")})
                torch.cuda.empty_cache()
    if keep("engine_decode_default"):
        length = s["decode_lengths"][0]
        us = median_wall_us(decode_preallocated(s, length, decode_reps, contextlib.nullcontext), decode_reps,
                            s["max_warmup_runs"])
        rows.append(row("engine_decode_default", s, length, 1, us))
    if keep("engine_decode_cat"):
        for length in s["decode_lengths"][:2]:  # torch.cat copies the whole cache per token: not at 128K
            us = median_wall_us(decode_cat(s, length), decode_reps, s["max_warmup_runs"])
            rows.append(row("engine_decode_cat", s, length, 1, us))
            torch.cuda.empty_cache()
    if keep("engine_prefill"):
        length, chunk = s["prefill_length"], s["chunk"]
        rows.append(row("engine_prefill", s, length, chunk,
                        median_wall_us(prefill_chunk(s, length, chunk), s["prefill_repetitions"], s["max_warmup_runs"])))
    return rows
