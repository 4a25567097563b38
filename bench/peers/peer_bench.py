#!/usr/bin/env python3
"""The peer: what users run today. Times the same shapes as kvc-bench with PyTorch on the same
GPU (CUDA events, warm-up, median; the engine rows on the wall clock, engine_torch.py) and writes
kvc-bench's JSON, so that `kvc-bench --compare peer.json` prints both side by side. Needs PyTorch
and a CUDA GPU.

    python3 bench/peers/peer_bench.py [--quick] [--only PREFIX ...] [--json peer.json]
"""
import argparse
import datetime
import importlib
import json
import pathlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right

import engine_torch

DTYPES = {"f16": torch.float16, "f32": torch.float32}


def timed_us(step):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0


def median_us(step, warmup=3, repetitions=25, warm_seconds=0.2):
    # As kvc-bench: keep the GPU busy for warm_seconds first and until the runs stop getting
    # faster, so its clocks are up.
    started, runs, warm = time.perf_counter(), 0, engine_torch.Warmup()
    while True:
        still_faster = warm.settling(timed_us(step))
        runs += 1
        if runs >= warmup and time.perf_counter() - started >= warm_seconds and not still_faster:
            break
    return statistics.median(timed_us(step) for _ in range(repetitions))


def copy_gbps(nbytes=1 << 30):
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * nbytes / (median_us(lambda: dst.copy_(src)) * 1e3)


def attention_row(name, length, queries, dtype, q_heads=32, kv_heads=8, dim=128):
    t = DTYPES[dtype]
    q = torch.rand(1, q_heads, queries, dim, device="cuda", dtype=t) * 2 - 1
    k = torch.rand(1, kv_heads, length, dim, device="cuda", dtype=t) * 2 - 1
    v = torch.rand_like(k)
    # A chunk attends causally over everything cached before it: the mask is aligned bottom-right.
    mask = causal_lower_right(queries, length) if queries > 1 else None
    step = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    elem = q.element_size()
    return {"name": name, "shape": f"L={length} n={queries} qh={q_heads} kvh={kv_heads} d={dim}", "dtype": dtype,
            "us": median_us(step), "bytes": 2.0 * kv_heads * length * dim * elem + 2.0 * queries * q_heads * dim * elem}


def decode_batch_row(name, batch, length, per_cache, q_heads=32, kv_heads=8, dim=128):
    """One decode query for each of `batch` sequences of `length` (f16): one batched SDPA call, or
    with per_cache one call per sequence, as kvc-bench's decode_batch and decode_batch_per_cache."""
    q = torch.rand(batch, q_heads, 1, dim, device="cuda", dtype=torch.float16) * 2 - 1
    k = torch.rand(batch, kv_heads, length, dim, device="cuda", dtype=torch.float16) * 2 - 1
    v = torch.rand_like(k)
    if per_cache:
        def step():
            for b in range(batch):
                F.scaled_dot_product_attention(q[b:b + 1], k[b:b + 1], v[b:b + 1], enable_gqa=True)
    else:
        step = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    elem = q.element_size()
    return {"name": name, "shape": f"B={batch} L={length} qh={q_heads} kvh={kv_heads} d={dim} full", "dtype": "f16",
            "us": median_us(step), "bytes": batch * (2.0 * kv_heads * length * dim * elem + 2.0 * q_heads * dim * elem)}


def wanted(name, only):
    """As kvc-bench's --only: a row runs when its name starts with one of the prefixes (all without)."""
    return not only or any(name.startswith(prefix) for prefix in only)


def policy_rows(quick, only):
    """Rows of the policies' own PyTorch formulations (bench/peers/<policy>_torch.py), each
    module exposing ROWS: a list of (name, shape string, dtype, kwargs) and make_step."""
    rows = []
    here = pathlib.Path(__file__).parent
    sys.path.insert(0, str(here))
    for path in sorted(here.glob("*_torch.py")):
        module = importlib.import_module(path.stem)
        for name, shape, dtype, kwargs in getattr(module, "ROWS", []):
            if (quick and kwargs.get("heavy")) or not wanted(name, only):
                continue
            step = module.make_step("cuda", DTYPES[dtype], **{k: v for k, v in kwargs.items() if k != "heavy"})
            rows.append({"name": name, "shape": shape, "dtype": dtype, "us": median_us(step), "bytes": 0})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", action="append", default=[], metavar="PREFIX",
                        help="time only the rows whose name starts with PREFIX (repeatable)")
    parser.add_argument("--json", default="peer.json")
    args = parser.parse_args()
    torch.manual_seed(0)
    lengths = [4096] if args.quick else [4096, 32768, 131072]
    rows = []
    if wanted("decode_attention", args.only):
        for dtype in ("f16", "f32"):
            for length in lengths:
                rows.append(attention_row("decode_attention", length, 1, dtype))
    for name, per_cache in (("decode_batch", False), ("decode_batch_per_cache", True)):
        if wanted(name, args.only):
            for batch in (1, 8, 32):
                rows.append(decode_batch_row(name, batch, 256 if args.quick else 4096, per_cache))
    queries = 128 if args.quick else 2048
    if wanted("prefill_attention", args.only):
        for cached in ([1024] if args.quick else [32768, 4096, 131072]):
            rows.append(attention_row("prefill_attention", cached + queries, queries, "f16"))
    rows += policy_rows(args.quick, args.only)
    rows += engine_torch.engine_rows(args.quick, lambda name: wanted(name, args.only))
    report = {"device": torch.cuda.get_device_name(), "driver": f"torch {torch.__version__}, CUDA {torch.version.cuda}",
              "date": datetime.date.today().isoformat(), "copy_gbps": copy_gbps(), "rows": rows}
    pathlib.Path(args.json).write_text(json.dumps(report, indent=2))
    for row in rows:
        print(f"{row['name']:<24} {row['shape']:<58} {row['dtype']:<5} {row['us']:10.1f} us")


if __name__ == "__main__":
    main()
