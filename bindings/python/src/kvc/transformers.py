"""A Hugging Face `transformers` cache whose KV cache and attention run in libkvc, under any policy.

    import kvc, kvc.transformers
    model = kvc.transformers.use_kvc_attention(model)      # attention through libkvc
    cache = kvc.transformers.KvcCache(model.config, capacity=4096, policy=kvc.Policy.SNAPKV,
                                      params=kvc.WindowParams(budget=256))
    output = model.generate(input_ids, past_key_values=cache, max_new_tokens=64)

How it fits transformers (5.x): the model's attention modules apply RoPE and call
`past_key_values.update(k, v, layer_idx)`, then the attention function registered under the name
"kvc" (AttentionInterface). `KvcCache.update` only hands the new keys and values to its layer;
the attention function appends them to libkvc and runs libkvc's causal attention for the layer's
queries, in pieces of `prefill_chunk` tokens when that is set (an eviction policy's cache holds
`capacity` plus `chunk_slots`; FREQKV's pieces fit the room its window has). Keys arrive after the model's RoPE, so the libkvc cache is made
with RopeStyle.NONE: it works for any model whose attention is softmax(q k^T * scaling) v, with
the positions the model gives (FAEDKV and FOURIER ask for keys rotated so). The prompt ends, for
the observation-window policies (SNAPKV, PYRAMIDKV, HITKV, PHITKV), FAEDKV and FOURIER, at the first
forward of one token after it (kvc_cache_end_prefill).

Limits: batch size 1 (a libkvc cache is one sequence), no padding mask, no beam search or
cropping, float32 or float16 models (libkvc stores f32 or f16; bfloat16 is refused).
"""
from __future__ import annotations

import contextvars
import math
from typing import Any, Optional, Tuple

import numpy as np
import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache, CacheLayerMixin

import kvc

ATTENTION_NAME = "kvc"
# The policies that act when the prompt ends (kvc_cache_end_prefill).
_ENDS_PREFILL = {kvc.Policy.SNAPKV, kvc.Policy.PYRAMIDKV, kvc.Policy.HITKV, kvc.Policy.PHITKV, kvc.Policy.FAEDKV,
                 kvc.Policy.FOURIER}
# The KvcCache whose update() ran last: the attention function of the same layer reads it.
_active_cache: contextvars.ContextVar[Optional["KvcCache"]] = contextvars.ContextVar("kvc_active_cache", default=None)


class KvcLayer(CacheLayerMixin):
    """One model layer of a KvcCache: counts the tokens seen (the positions transformers uses)
    and holds the keys and values of the current forward until the attention function takes them."""

    is_compileable = False
    is_croppable = False
    supports_early_init = False

    def __init__(self, layer: int):
        super().__init__()
        self.layer = layer
        self.tokens_seen = 0
        self.pending: Optional[Tuple[torch.Tensor, torch.Tensor]] = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
               ) -> Tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if key_states.shape[0] != 1:
            raise ValueError(f"KvcCache holds one sequence; the batch has {key_states.shape[0]}")
        # [1, kv_heads, n, head_dim] -> libkvc's [n, kv_heads, head_dim]
        self.pending = (key_states[0].detach().transpose(0, 1).contiguous(),
                        value_states[0].detach().transpose(0, 1).contiguous())
        self.tokens_seen += key_states.shape[-2]
        return key_states, value_states

    def get_mask_sizes(self, query_length: int) -> Tuple[int, int]:
        return self.tokens_seen + query_length, 0

    def get_seq_length(self) -> int:
        return self.tokens_seen

    def get_max_length(self) -> int:
        return -1

    def reset(self) -> None:
        self.tokens_seen = 0
        self.pending = None

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("KvcCache holds one sequence: beam search is not supported")

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("a libkvc cache cannot be cropped (its policy may have compressed the tokens)")


class KvcCache(Cache):
    """A transformers Cache whose keys, values and attention live in a libkvc cache.

    Args:
        config: the model's config (its text config for multimodal models) giving the layers,
            heads and head_dim; or pass `layers`, `q_heads`, `kv_heads`, `head_dim`.
        capacity: slots per layer (kvc_cache_desc.capacity): for FULL and the window policies
            the longest prompt plus the tokens generated; for the eviction policies the cache
            size; for FREQKV its window N.
        policy, params: the libkvc policy and its parameters (kvc.EvictionParams, ...).
        prefill_chunk: feed a prompt to libkvc in pieces of at most this many tokens (eviction
            policies: at most their chunk_slots). FREQKV's pieces also fit its window's room.
        context: a kvc.Context to use, or None to make one on `backend`.
    """

    def __init__(self, config: Any = None, *, capacity: int, policy: kvc.Policy = kvc.Policy.FULL,
                 params: Any = None, prefill_chunk: Optional[int] = None, backend: kvc.Backend = kvc.Backend.AUTO,
                 context: Optional[kvc.Context] = None, layers: Optional[int] = None, q_heads: Optional[int] = None,
                 kv_heads: Optional[int] = None, head_dim: Optional[int] = None):
        if config is not None:
            config = config.get_text_config() if hasattr(config, "get_text_config") else config
            layers = layers or config.num_hidden_layers
            q_heads = q_heads or config.num_attention_heads
            kv_heads = kv_heads or getattr(config, "num_key_value_heads", None) or q_heads
            head_dim = head_dim or getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        if None in (layers, q_heads, kv_heads, head_dim):
            raise ValueError("KvcCache needs a config, or layers, q_heads, kv_heads and head_dim")
        super().__init__(layers=[KvcLayer(layer) for layer in range(layers)])
        self.shape = dict(layers=layers, q_heads=q_heads, kv_heads=kv_heads, head_dim=head_dim)
        self.capacity, self.policy, self.params = capacity, kvc.Policy(policy), params
        self.prefill_chunk = prefill_chunk
        self._owns_context = context is None
        self.context = context if context is not None else kvc.Context(backend=backend)
        self.kvc_cache: Optional[kvc.Cache] = None  # made at the first update, in the model's dtype
        self.prefill_ended = False

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any,
               **kwargs: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.kvc_cache is None:
            if key_states.dtype not in (torch.float32, torch.float16):
                raise kvc.DTypeMismatchError(f"libkvc stores float32 or float16; the model runs {key_states.dtype}")
            self.kvc_cache = kvc.Cache(self.context, capacity=self.capacity, policy=self.policy, params=self.params,
                                       dtype=str(key_states.dtype).removeprefix("torch."), **self.shape)
        _active_cache.set(self)
        return self.layers[layer_idx].update(key_states, value_states)

    def attend(self, layer_idx: int, query: torch.Tensor, scaling: float) -> torch.Tensor:
        """Appends the layer's pending keys and values and returns libkvc's attention for `query`
        ([1, q_heads, n, head_dim]) as [1, n, q_heads, head_dim]."""
        layer = self.layers[layer_idx]
        if layer.pending is None:
            raise RuntimeError(f"layer {layer_idx}: attention ran without KvcCache.update (pass the KvcCache as "
                               "past_key_values)")
        keys, values = layer.pending
        layer.pending = None
        n = keys.shape[0]
        if (self.policy in _ENDS_PREFILL and not self.prefill_ended and n == 1
                and layer.tokens_seen > 1 and layer_idx == 0):
            self.kvc_cache.end_prefill()  # every layer attended the whole prompt in the last forward
            self.prefill_ended = True
        queries = query[0].detach().transpose(0, 1)
        head_dim = queries.shape[-1]
        if not math.isclose(scaling, head_dim ** -0.5, rel_tol=1e-6):
            queries = queries * (scaling * math.sqrt(head_dim))  # libkvc scales logits by 1/sqrt(head_dim)
        queries = queries.contiguous()
        out = torch.empty_like(queries)
        start = 0
        while start < n:
            end = min(start + (self.prefill_chunk or n), n)
            if self.policy == kvc.Policy.FREQKV:  # a chunk fits the window's room; a full window compresses
                end = min(end, start + self.capacity - self.kvc_cache.layer_slots(layer_idx))
            self.kvc_cache.append(layer_idx, keys[start:end], values[start:end])
            self.kvc_cache.attend(layer_idx, queries[start:end], out=out[start:end])
            start = end
        return out.unsqueeze(0)

    @property
    def stats(self) -> Optional[kvc.CacheStats]:
        """The libkvc cache's counters, or None before the first forward."""
        return None if self.kvc_cache is None else self.kvc_cache.stats

    def layer_slots(self, layer_idx: int) -> int:
        """Slots libkvc holds for the layer now (what the policy kept)."""
        return 0 if self.kvc_cache is None else self.kvc_cache.layer_slots(layer_idx)

    def reset(self) -> None:
        super().reset()
        if self.kvc_cache is not None:
            self.kvc_cache.reset()
        self.prefill_ended = False

    def close(self) -> None:
        """Frees the libkvc cache (and the context, when this cache made it)."""
        if self.kvc_cache is not None:
            self.kvc_cache.close()
            self.kvc_cache = None
        if self._owns_context:
            self.context.close()

    def __enter__(self) -> "KvcCache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def kvc_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: Optional[torch.Tensor], scaling: Optional[float] = None, dropout: float = 0.0,
                  **kwargs: Any) -> Tuple[torch.Tensor, None]:
    """The attention function registered as "kvc": causal attention over the KvcCache of the
    running forward (the mask is not used: one sequence, causal)."""
    cache = _active_cache.get()
    if cache is None:
        raise RuntimeError("attn_implementation 'kvc' needs past_key_values=KvcCache(...) and use_cache=True")
    head_dim = query.shape[-1]
    return cache.attend(module.layer_idx, query, scaling if scaling is not None else head_dim ** -0.5), None


AttentionInterface.register(ATTENTION_NAME, kvc_attention)


def use_kvc_attention(model: Any) -> Any:
    """Switches `model` to the "kvc" attention implementation (pass a KvcCache to forward or
    generate as past_key_values) and returns it; model.set_attn_implementation("eager") undoes it."""
    model.set_attn_implementation(ATTENTION_NAME)
    return model
