#!/usr/bin/env python3
"""What each libkvc policy costs a real model: perplexity and per-layer attention error against
FULL, at a memory budget, on held-out text, with the model's attention and cache in libkvc.

    python3 eval/perplexity.py                       # every policy, budgets 256/512/1024, 4K/8K/16K
    python3 eval/perplexity.py --lengths 4096 --budgets 512 --policies FULL H2O --backend cpu

The protocol, for a document of L tokens and P predicted ones (default 256): the first L - P
tokens are the prompt, fed to libkvc in chunks (each chunk attends causally over what the cache
holds, as an engine's chunked prefill does); the prompt ends (kvc_cache_end_prefill); the last P
tokens are decoded one at a time, each attending over the compressed cache. Perplexity is over
those P tokens (the first predicted by the prompt's last logits, the others by P - 1 decode
steps). At every decode step each layer's attention output is also compared with exact
attention over every token seen (the same layer inputs, positions as the model gives them): the
relative error per layer is ||out - exact|| / ||exact|| over the P - 1 steps. The bytes are libkvc's
device_bytes_held at the end. Caches store float32 (the policies are compared, not the dtype).

Positions: libkvc applies RoPE (keys stored before RoPE, each slot rotated by the position the
policy gives it: eviction policies and FreqKV re-number kept tokens, as their papers do) for every
policy that accepts it; FAEDKV and FOURIER transform keys as the model stores them, rotated.

Also runs FAEDKV's chunk ablation (eq. 7) on the validation text, which is never scored
(--ablation), and writes the importance table it gives; FAEDKV then runs with both its default
chunks and the ablation's choice.
Writes JSON (--json) that eval/report.py turns into docs/fidelity.md and its plots.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import sys
import time
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

import kvc

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from model import FullCache, Model, load, rope  # noqa: E402

POLICIES = ("FULL", "STREAMING", "H2O", "TOVA", "TREEKV", "SNAPKV", "PYRAMIDKV", "HITKV", "PHITKV", "FREQKV",
            "FAEDKV", "FOURIER")
# The policies libkvc refuses to rotate for (they transform keys as the model stores them).
MODEL_ROPE = {"FAEDKV", "FOURIER"}
FAEDKV_SINKS, FAEDKV_RECENT, FAEDKV_CHUNKS = 10, 50, 22  # the paper's settings
ENDS_PREFILL = {kvc.Policy.SNAPKV, kvc.Policy.PYRAMIDKV, kvc.Policy.HITKV, kvc.Policy.PHITKV, kvc.Policy.FAEDKV,
                kvc.Policy.FOURIER}


@dataclasses.dataclass
class Setting:
    """One policy at one budget: how the libkvc cache is made and fed."""
    label: str
    policy: kvc.Policy
    budget: Optional[int]
    capacity: int
    params: Any = None
    chunk: int = 512  # prompt tokens per append
    fits_room: bool = False  # FREQKV: an append holds at most the window's free slots
    libkvc_rope: bool = True  # libkvc rotates q and k; False: they arrive rotated by the model

    def __post_init__(self):
        self.libkvc_rope = self.libkvc_rope and self.policy.name not in MODEL_ROPE


def settings(name: str, budget: int, length: int, predict: int, importance: Optional[list] = None) -> list[Setting]:
    """The settings of policy `name` at `budget` slots per layer for a document of `length`."""
    policy, prompt = kvc.Policy[name], length - predict
    if name == "FULL":
        return [Setting("FULL", policy, None, length)]
    if name in ("STREAMING", "H2O", "TOVA", "TREEKV"):
        chunk = min(64, budget)  # the room an append needs beyond the cache size is memory too
        return [Setting(name, policy, budget, budget, kvc.EvictionParams(chunk_slots=chunk), chunk=chunk)]
    if name in ("SNAPKV", "PYRAMIDKV", "HITKV", "PHITKV"):
        return [Setting(name, policy, budget, length, kvc.WindowParams(budget=budget, decode_slots=predict))]
    if name == "FREQKV":
        # The window N is the budget: the cache never holds more than N slots. The paper's 4 sinks,
        # and the authors' code's 8 sinks + 8 recent tokens.
        return [Setting(name, policy, budget, budget, kvc.FreqKVParams(), fits_room=True),
                Setting("FREQKV (authors' 8+8)", policy, budget, budget,
                        kvc.FreqKVParams(sink_tokens=8, recent_tokens=8), fits_room=True)]
    if name == "FAEDKV":
        # Bins as many as the budget's bytes allow beside the sinks and the window: a kept bin is a
        # complex float32 pair (two slots' worth per dim), stored once per conjugate pair.
        middle = prompt - FAEDKV_SINKS - FAEDKV_RECENT
        bins = max(1, (budget - FAEDKV_SINKS - FAEDKV_RECENT) // 2)
        chunks = FAEDKV_CHUNKS if importance is None else len(importance[0])
        ratio = min(1.0, max(1.0 / chunks, 2.0 * bins / middle))
        found = [Setting(name, policy, budget, length, kvc.FaedKVParams(chunks=chunks, retain_ratio=ratio))]
        if importance is not None:
            found.append(Setting("FAEDKV (ablation's chunks)", policy, budget, length,
                                 kvc.FaedKVParams(chunks=chunks, retain_ratio=ratio, chunk_importance=importance)))
        return found
    if name == "FOURIER":
        # The budget is the exact part (sinks + local window); the middle keeps its uncompressed
        # dims and 2N coefficients per compressed dim (N = budget / 4).
        params = kvc.FourierParams(sinks=4, local_window=budget - 4, num_states=max(8, budget // 4),
                                   window_length=length)
        return [Setting(name, policy, budget, length, params)]
    raise ValueError(f"unknown policy {name}")


def documents(heldout: dict, length: int, count: int) -> list[tuple[str, list[int]]]:
    """Up to `count` documents of `length` tokens, one from each held-out directory in turn."""
    found, offset = [], 0
    while len(found) < count:
        added = False
        for name, ids in heldout.items():
            if len(found) < count and offset + length <= len(ids):
                found.append((f"{name}@{offset}", ids[offset:offset + length]))
                added = True
        if not added:
            break
        offset += length
    return found


class PolicyRun:
    """The model over one document with its attention in a libkvc cache of one setting, and the
    exact attention of the same layer inputs beside it (FullCache) for the per-layer error."""

    def __init__(self, model: Model, context: kvc.Context, setting: Setting):
        c = model.config
        self.model, self.setting = model, setting
        self.cache = kvc.Cache(context, layers=c.layers, q_heads=c.q_heads, kv_heads=c.kv_heads, head_dim=c.head_dim,
                               capacity=setting.capacity, policy=setting.policy, params=setting.params, dtype="float32",
                               rope=kvc.RopeStyle.NEOX if setting.libkvc_rope else kvc.RopeStyle.NONE,
                               rope_theta=c.rope_theta)
        self.exact = FullCache(c)
        self.measuring = False
        self.error = np.zeros(c.layers)
        self.norm = np.zeros(c.layers)

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               positions: torch.Tensor) -> torch.Tensor:
        if not self.setting.libkvc_rope:
            q, k = rope(q, positions, self.model.config.rope_theta), rope(k, positions, self.model.config.rope_theta)
            positions = None  # rotated: the reference takes them as they are
        host = lambda t: t.detach().float().cpu().contiguous()
        self.cache.append(layer, host(k), host(v))
        out = torch.from_numpy(self.cache.attend(layer, host(q))).to(q.device)
        if self.measuring:
            exact = self.exact.attend(layer, q.float(), k.float(), v.float(), positions)
            self.error[layer] += float((out - exact).square().sum())
            self.norm[layer] += float(exact.square().sum())
        else:
            self.exact.append(layer, k.float(), v.float(), positions)
        return out.to(q.dtype)

    def run(self, tokens: torch.Tensor, predict: int) -> dict:
        prompt = tokens.shape[0] - predict
        s, start, logits = self.setting, 0, None
        with torch.no_grad():
            while start < prompt:
                end = min(start + s.chunk, prompt)
                if s.fits_room:  # every layer holds the same count: layer 0's room is each layer's
                    room = s.capacity - self.cache.layer_slots(0)
                    if room <= 0:
                        raise RuntimeError(f"{s.label}: the window is full after an attend (it compresses then)")
                    end = min(end, start + room)
                logits = self.model.step(tokens[start:end], start, self.attend)
                start = end
            nll = [F.cross_entropy(logits[-1:].float(), tokens[prompt:prompt + 1]).item()]
            if s.policy in ENDS_PREFILL:
                self.cache.end_prefill()
            self.measuring = True
            for position in range(prompt, tokens.shape[0] - 1):
                logits = self.model.step(tokens[position:position + 1], position, self.attend)
                nll.append(F.cross_entropy(logits.float(), tokens[position + 1:position + 2]).item())
        return {"nll": float(np.mean(nll)), "bytes_held": self.cache.stats.device_bytes_held,
                "slots_layer0": self.cache.layer_slots(0),
                "layer_error": np.sqrt(self.error / np.maximum(self.norm, 1e-30)).tolist()}

    def close(self) -> None:
        self.cache.close()


def faedkv_ablation(model: Model, context: kvc.Context, tokens: torch.Tensor, predict: int, chunks: int) -> dict:
    """Eq. 7 on one document: the perplexity of its last `predict` tokens when chunk c of layer
    l's middle is pruned (kvc_faedkv_ablate, eq. 6), minus the perplexity over the whole cache,
    for every l and c. The prompt goes through a FULL cache holding keys as the model stores
    them (rotated); the continuation is scored in one causal chunk over the (ablated) cache."""
    c, prompt = model.config, tokens.shape[0] - predict
    params = kvc.FaedKVParams(sinks=FAEDKV_SINKS, recent_window=FAEDKV_RECENT, chunks=chunks)
    run = PolicyRun(model, context, Setting("FULL", kvc.Policy.FULL, None, tokens.shape[0], libkvc_rope=False))
    try:
        with torch.no_grad():
            for start in range(0, prompt, 512):
                model.step(tokens[start:min(start + 512, prompt)], start, run.attend)
            whole = [run.cache.read(layer)[:2] for layer in range(c.layers)]

            def continuation_ppl(layer: int, replaced: Optional[tuple] = None) -> float:
                reference = FullCache(c)
                for index, (keys, values) in enumerate(whole):
                    keys, values = replaced if index == layer else (keys, values)
                    reference.replace(index, *(torch.from_numpy(t).transpose(0, 1).to(tokens.device)
                                               for t in (keys, values)))

                def attend(index, q, k, v, positions):
                    theta = c.rope_theta
                    return reference.attend(index, rope(q, positions, theta), rope(k, positions, theta), v, None)
                logits = model.step(tokens[prompt:-1], prompt, attend)
                return math.exp(F.cross_entropy(logits.float(), tokens[prompt + 1:]).item())

            baseline = continuation_ppl(-1)
            delta = [[continuation_ppl(layer, run.cache.faedkv_ablate(layer, chunk, params)) - baseline
                      for chunk in range(chunks)] for layer in range(c.layers)]
    finally:
        run.close()
    return {"baseline_ppl": baseline, "chunks": chunks, "delta": delta}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", type=pathlib.Path, default=HERE / "weights")
    parser.add_argument("--data", type=pathlib.Path, default=HERE / "data")
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192, 16384])
    parser.add_argument("--budgets", type=int, nargs="+", default=[256, 512, 1024])
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument("--docs", type=int, default=1, help="documents per length")
    parser.add_argument("--predict", type=int, default=256)
    parser.add_argument("--ablation", action="store_true", help="FAEDKV's chunk ablation (eq. 7) first")
    parser.add_argument("--importance", type=pathlib.Path, help="take the ablation's table from this JSON instead")
    parser.add_argument("--backend", choices=("auto", "vulkan", "cpu"), default="auto")
    parser.add_argument("--json", type=pathlib.Path, default=pathlib.Path("fidelity.json"))
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = load(args.weights, device)
    heldout = json.loads((args.data / "heldout.json").read_text())
    context = kvc.Context(backend=kvc.Backend[args.backend.upper()])
    report = {"device": context.info.device_name, "torch_device": torch.cuda.get_device_name() if device == "cuda"
              else "cpu", "predict": args.predict, "source": (args.data / "source.txt").read_text().strip(),
              "date": time.strftime("%Y-%m-%d"), "rows": []}
    importance = None
    if args.ablation:
        # The validation text (the training's stopping rule saw its loss, never its continuations
        # scored here): the chunks are not chosen on a document they are then scored on.
        name = "validation@0"
        ids = np.fromfile(args.data / "validation.u16", dtype=np.uint16)[:args.lengths[0]].astype(np.int64).tolist()
        started = time.perf_counter()
        report["ablation"] = dict(document=name, **faedkv_ablation(
            model, context, torch.tensor(ids, device=device), args.predict, FAEDKV_CHUNKS))
        importance = report["ablation"]["delta"]
        print(f"ablation on {name}: {time.perf_counter() - started:.1f} s", flush=True)
    elif args.importance:
        report["ablation"] = json.loads(args.importance.read_text())["ablation"]
        importance = report["ablation"]["delta"]
    for length in args.lengths:
        for name, ids in documents(heldout, length, args.docs):
            tokens = torch.tensor(ids, device=device)
            for policy in args.policies:
                for budget in ([None] if policy == "FULL" else args.budgets):
                    for setting in settings(policy, budget or length, length, args.predict, importance):
                        started, run = time.perf_counter(), None
                        try:
                            run = PolicyRun(model, context, setting)
                            row = run.run(tokens, args.predict)
                        except Exception as error:  # a setting that fails is reported; the others run
                            row = {"error": f"{type(error).__name__}: {error}"}
                        finally:
                            if run is not None:
                                run.close()
                        row.update(length=length, document=name, policy=setting.label, budget=setting.budget,
                                   seconds=round(time.perf_counter() - started, 2),
                                   rope="libkvc" if setting.libkvc_rope else "model")
                        report["rows"].append(row)
                        shown = f"ppl {math.exp(row['nll']):9.3f}  bytes {row['bytes_held']:>10}" if "nll" in row \
                            else row["error"]
                        print(f"L={length:<6} {name:<16} {setting.label:<28} B={budget or '-':<5} {shown}  "
                              f"({row['seconds']} s)", flush=True)
                        args.json.write_text(json.dumps(report, indent=1) + "\n")
    args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
