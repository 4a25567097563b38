"""CI's check of the fidelity evaluation (eval/perplexity.py): a one-layer slice of the committed
model over a short real document (this repository's README, tokenized by the committed
tokenizer), with its attention in libkvc on the CPU backend."""
from __future__ import annotations

import dataclasses
import math
import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

import kvc

EVAL = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(EVAL))
import perplexity  # noqa: E402
from model import Model, load  # noqa: E402

LENGTH, PREDICT, BUDGET = 640, 64, 256


@pytest.fixture(scope="module")
def model() -> Model:
    whole = load(EVAL / "weights")
    sliced = Model(dataclasses.replace(whole.config, layers=1))
    sliced.load_state_dict(whole.state_dict(), strict=False)  # the embedding, the first block, the norm
    return sliced.eval()


@pytest.fixture(scope="module")
def tokens() -> torch.Tensor:
    from tokenizers import Tokenizer
    text = (EVAL.parent / "README.md").read_text()
    ids = Tokenizer.from_file(str(EVAL / "tokenizer.json")).encode(text).ids
    assert len(ids) >= LENGTH, "the README is the test's document"
    return torch.tensor(ids[:LENGTH])


@pytest.fixture(scope="module")
def context():
    with kvc.Context(backend=kvc.Backend.CPU) as context:
        yield context


def test_full_through_libkvc_equals_the_models_own_attention(model, tokens, context):
    reference = model(tokens[None])[0]
    setting = perplexity.Setting("FULL", kvc.Policy.FULL, None, LENGTH, chunk=200)
    run = perplexity.PolicyRun(model, context, setting)
    try:
        with torch.no_grad():
            logits = torch.cat([model.step(tokens[start:start + 200], start, run.attend)
                                for start in range(0, LENGTH, 200)])
    finally:
        run.close()
    scale = reference.abs().max().item()
    assert (logits - reference).abs().max().item() <= 1e-4 * scale


def test_full_perplexity_is_the_models(model, tokens, context):
    run = perplexity.PolicyRun(model, context, perplexity.Setting("FULL", kvc.Policy.FULL, None, LENGTH))
    try:
        row = run.run(tokens, PREDICT)
    finally:
        run.close()
    with torch.no_grad():
        logits = model(tokens[None])[0]
    expected = F.cross_entropy(logits[-PREDICT - 1:-1], tokens[-PREDICT:]).item()
    assert row["nll"] == pytest.approx(expected, rel=1e-4)
    assert max(row["layer_error"]) < 1e-5  # FULL is exact attention


@pytest.mark.parametrize("policy", [p for p in perplexity.POLICIES if p != "FULL"])
def test_every_policy_runs_the_protocol(model, tokens, context, policy):
    for setting in perplexity.settings(policy, BUDGET, LENGTH, PREDICT):
        run = perplexity.PolicyRun(model, context, setting)
        try:
            row = run.run(tokens, PREDICT)
        finally:
            run.close()
        assert math.isfinite(row["nll"]), setting.label
        assert 0 < row["layer_error"][0] < 1, setting.label  # compressed: not exact, not garbage
        assert row["bytes_held"] > 0


def test_faedkv_ablation_gives_a_table(model, tokens, context):
    result = perplexity.faedkv_ablation(model, context, tokens, PREDICT, chunks=6)
    assert len(result["delta"]) == 1 and len(result["delta"][0]) == 6
    assert all(math.isfinite(d) for d in result["delta"][0])
    assert any(d != 0 for d in result["delta"][0])
