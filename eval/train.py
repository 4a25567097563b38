#!/usr/bin/env python3
"""Trains the evaluation's model (eval/model.py) on eval/data/train.u16 for a fixed wall-clock
budget on one GPU, and writes eval/weights/ (config.json, model.safetensors in float16, log.json).

    python3 eval/prepare_data.py && python3 eval/train.py [--minutes 2]

AdamW, bfloat16 autocast, sequences of the model's context (4096) drawn at random offsets, the
learning rate warmed up then decayed on a cosine over the time budget. The text is small (about
ten million tokens) for the model: every 100 steps the loss on the validation directory is
measured, and the weights of the best one are kept (the model memorizes its text past a few
epochs). The held-out loss is logged at the end. Not part of CI: the committed weights are what
the evaluation uses.
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib
import time

import numpy as np
import torch
import torch.nn.functional as F

from model import Config, Model

HERE = pathlib.Path(__file__).resolve().parent


def batches(tokens: np.ndarray, batch: int, length: int, generator: np.random.Generator, device: str):
    while True:
        starts = generator.integers(0, len(tokens) - length - 1, size=batch)
        window = np.stack([tokens[s:s + length + 1] for s in starts]).astype(np.int64)
        window = torch.from_numpy(window).to(device, non_blocking=True)
        yield window[:, :-1], window[:, 1:]


@torch.no_grad()
def mean_loss(model: Model, texts: list, length: int, device: str) -> float:
    """Mean next-token loss over consecutive windows of each text."""
    losses = []
    for ids in texts:
        for start in range(0, len(ids) - length - 1, length):
            window = torch.tensor(ids[start:start + length + 1], device=device)[None]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(window[:, :-1])
            losses.append(F.cross_entropy(logits.float().view(-1, logits.shape[-1]), window[0, 1:]).item())
    return float(np.mean(losses))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--data", type=pathlib.Path, default=HERE / "data")
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "weights")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = "cuda"
    config = Config()
    model = Model(config).to(device)
    parameters = sum(p.numel() for p in model.parameters())
    tokens = np.fromfile(args.data / "train.u16", dtype=np.uint16)
    heldout = json.loads((args.data / "heldout.json").read_text())
    validation = [np.fromfile(args.data / "validation.u16", dtype=np.uint16).tolist()]
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95), fused=True)
    budget, warmup = args.minutes * 60.0, 100
    stream = batches(tokens, args.batch, config.context, np.random.default_rng(0), device)
    log, started, step = [], time.perf_counter(), 0
    best = (math.inf, 0, None)  # validation loss, step, weights
    while (elapsed := time.perf_counter() - started) < budget:
        progress = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        for group in optimizer.param_groups:
            group["lr"] = lr
        inputs, targets = next(stream)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().view(-1, config.vocabulary), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step += 1
        if step % 100 == 0:
            model.eval()
            checked = mean_loss(model, validation, config.context, device)
            model.train()
            if checked < best[0]:
                best = (checked, step, {k: v.detach().clone() for k, v in model.state_dict().items()})
            entry = {"step": step, "seconds": round(elapsed, 1), "lr": lr, "loss": round(loss.item(), 4),
                     "validation_loss": round(checked, 4)}
            log.append(entry)
            print(json.dumps(entry), flush=True)
    if best[2] is None:
        raise SystemExit(f"training stopped after {step} steps, before the first validation check (step 100)")
    model.load_state_dict(best[2])
    model.eval()
    summary = {"parameters": parameters, "steps": step, "kept_step": best[1], "validation_loss": round(best[0], 4),
               "tokens_seen": best[1] * args.batch * config.context, "train_tokens": int(len(tokens)),
               "seconds": round(time.perf_counter() - started, 1),
               "heldout_loss": round(mean_loss(model, list(heldout.values()), config.context, device), 4),
               "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    print(json.dumps(summary), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    config.save(args.out / "config.json")
    from safetensors.torch import save_file
    save_file({name: tensor.detach().half().contiguous() for name, tensor in model.state_dict().items()},
              str(args.out / "model.safetensors"))
    (args.out / "log.json").write_text(json.dumps({"summary": summary, "log": log}, indent=1) + "\n")


if __name__ == "__main__":
    main()
