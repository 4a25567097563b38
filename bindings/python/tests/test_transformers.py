"""kvc.transformers on a small randomly initialised LlamaForCausalLM built from a config (no
weights are downloaded): under FULL its logits equal the model's own eager attention with a
DynamicCache, and under compressing policies it generates and holds its budget."""
from __future__ import annotations

import numpy as np
import pytest

import kvc
from conftest import require_module

torch = require_module("torch")
transformers = require_module("transformers")
import kvc.transformers  # noqa: E402  (needs torch and transformers)

PROMPT, NEW_TOKENS = 40, 12


@pytest.fixture
def model(rng):
    torch.manual_seed(int(rng.integers(2**31)))
    # head_dim 16 (a multiple of 8, as libkvc needs), grouped-query attention 4 q / 2 kv heads.
    config = transformers.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    model = transformers.LlamaForCausalLM(config).eval()
    model.set_attn_implementation("eager")
    return model


def _generate(model, input_ids, cache, attention):
    model.set_attn_implementation(attention)
    with torch.no_grad():
        return model.generate(input_ids, past_key_values=cache, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                              output_logits=True, return_dict_in_generate=True, pad_token_id=0)


def test_full_policy_equals_eager_attention(context, model, rng):
    input_ids = torch.from_numpy(rng.integers(1, 96, (1, PROMPT)))
    expected = _generate(model, input_ids, transformers.DynamicCache(), "eager")
    with kvc.transformers.KvcCache(model.config, capacity=PROMPT + NEW_TOKENS, context=context) as cache:
        actual = _generate(model, input_ids, cache, kvc.transformers.ATTENTION_NAME)
        assert cache.stats.slots_held == 2 * (PROMPT + NEW_TOKENS - 1)  # the last token is never fed back
    assert torch.equal(actual.sequences, expected.sequences)
    for step, (a, e) in enumerate(zip(actual.logits, expected.logits)):
        # Float32 throughout; libkvc and torch sum in different orders (~1e-6 of the scale), and
        # two layers of MLP and norms carry it: 1e-4 of the logits' scale.
        scale = e.abs().max().item()
        assert (a - e).abs().max().item() <= 1e-4 * scale, f"step {step}"


# held: slots each layer holds at the end (None: at most capacity); stored: stats.slots_held when
# it is not the slots attention sees (FAEDKV stores only its sinks and window).
@pytest.mark.parametrize("policy,capacity,params,prefill_chunk,held,stored", [
    (kvc.Policy.SNAPKV, PROMPT + NEW_TOKENS, kvc.WindowParams(budget=16, window=4), None, 16 + NEW_TOKENS - 1, None),
    (kvc.Policy.STREAMING, 16, kvc.EvictionParams(sinks=4, chunk_slots=8), 8, 16, None),
    (kvc.Policy.H2O, 16, kvc.EvictionParams(sinks=2, chunk_slots=8), 8, 16, None),
    (kvc.Policy.FREQKV, 24, kvc.FreqKVParams(), 8, None, None),
    (kvc.Policy.FAEDKV, PROMPT, kvc.FaedKVParams(sinks=4, recent_window=8, chunks=4, retain_ratio=0.5), None, PROMPT,
     2 * (4 + 8 + 1)),  # sinks, window and the slot of the token the next attention folds
], ids=["snapkv", "streaming", "h2o", "freqkv", "faedkv"])
def test_compressing_policy_generates_within_its_budget(context, model, rng, policy, capacity, params, prefill_chunk,
                                                        held, stored):
    input_ids = torch.from_numpy(rng.integers(1, 96, (1, PROMPT)))
    with kvc.transformers.KvcCache(model.config, capacity=capacity, policy=policy, params=params,
                                   prefill_chunk=prefill_chunk, context=context) as cache:
        output = _generate(model, input_ids, cache, kvc.transformers.ATTENTION_NAME)
        slots = [cache.layer_slots(layer) for layer in range(2)]
        stats = cache.stats
    assert output.sequences.shape == (1, PROMPT + NEW_TOKENS)
    assert all(torch.isfinite(logits).all() for logits in output.logits)
    assert stats.tokens_seen == 2 * (PROMPT + NEW_TOKENS - 1) and stats.compressions > 0
    assert slots == [held] * 2 if held is not None else all(s <= capacity for s in slots)
    assert stats.slots_held == (stored or sum(slots)) < stats.tokens_seen


def test_five_line_generation(model, rng):
    """The README's five lines, on the default device."""
    input_ids = torch.from_numpy(rng.integers(1, 96, (1, PROMPT)))
    model = kvc.transformers.use_kvc_attention(model)
    cache = kvc.transformers.KvcCache(model.config, capacity=128, policy=kvc.Policy.SNAPKV,
                                      params=kvc.WindowParams(budget=16, window=4))
    output = model.generate(input_ids, past_key_values=cache, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False,
                            pad_token_id=0)
    assert output.shape == (1, PROMPT + NEW_TOKENS)
    assert cache.layer_slots(0) == 16 + NEW_TOKENS - 1
    cache.close()
