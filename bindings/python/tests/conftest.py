"""Shared fixtures: a seeded generator whose seed is printed, the backends to run on, and a
NumPy attention reference. KVC_REQUIRE_GPU=1 (CI, lavapipe) turns a missing Vulkan device into
a failure, and KVC_REQUIRE_TORCH=1 a missing torch/transformers, instead of a skip."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

import kvc


def _vulkan_available() -> str:
    """'' when a Vulkan context can be made, else why not."""
    try:
        with kvc.Context(backend=kvc.Backend.VULKAN):
            return ""
    except (kvc.NoVulkanLoaderError, kvc.NoDeviceError) as error:
        return f"{type(error).__name__}: {error}"


_NO_VULKAN = _vulkan_available()


@pytest.fixture
def rng(request) -> np.random.Generator:
    """A generator seeded by $KVC_TEST_SEED or the clock; the seed is printed (pytest shows it
    with a failure) so that the failing case can be run again."""
    seed = int(os.environ.get("KVC_TEST_SEED", time.time_ns() % 2**31))
    print(f"{request.node.nodeid}: seed {seed} (KVC_TEST_SEED={seed} repeats it)")
    return np.random.default_rng(seed)


@pytest.fixture(params=[kvc.Backend.CPU, kvc.Backend.VULKAN], ids=["cpu", "vulkan"])
def context(request):
    """A context on each backend; Vulkan is skipped (or fails under KVC_REQUIRE_GPU=1) without a device."""
    if request.param == kvc.Backend.VULKAN and _NO_VULKAN:
        if os.environ.get("KVC_REQUIRE_GPU") == "1":
            pytest.fail(f"KVC_REQUIRE_GPU=1 but no Vulkan device: {_NO_VULKAN}")
        pytest.skip(f"no Vulkan device: {_NO_VULKAN}")
    with kvc.Context(backend=request.param) as ctx:
        yield ctx


@pytest.fixture
def vulkan_context():
    if _NO_VULKAN:
        if os.environ.get("KVC_REQUIRE_GPU") == "1":
            pytest.fail(f"KVC_REQUIRE_GPU=1 but no Vulkan device: {_NO_VULKAN}")
        pytest.skip(f"no Vulkan device: {_NO_VULKAN}")
    with kvc.Context(backend=kvc.Backend.VULKAN) as ctx:
        yield ctx


def require_module(name: str):
    """Imports `name`, or skips with the reason (fails under KVC_REQUIRE_TORCH=1)."""
    try:
        return __import__(name)
    except ImportError as error:
        if os.environ.get("KVC_REQUIRE_TORCH") == "1":
            pytest.fail(f"KVC_REQUIRE_TORCH=1 but {name} cannot be imported: {error}")
        pytest.skip(f"{name} is not installed ({error}); pip install 'kvc[transformers]' runs these tests",
                    allow_module_level=True)  # test_transformers.py calls it at import


def reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, slots_before: int):
    """Causal grouped-query attention in float64: q [n, H, d] are the newest n of the slots
    k, v [S, KV, d] (query i sees slots 0..slots_before + i). Returns the output [n, H, d] and
    the probabilities summed per kv head over its query heads and the queries [KV, S]."""
    n, q_heads, head_dim = q.shape
    slots, kv_heads, _ = k.shape
    group = q_heads // kv_heads
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    logits = np.einsum("nhd,shd->nhs", q64, np.repeat(k64, group, axis=1)) / np.sqrt(head_dim)
    visible = np.arange(slots)[None, :] <= slots_before + np.arange(n)[:, None]
    logits = np.where(visible[:, None, :], logits, -np.inf)
    probabilities = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities /= probabilities.sum(axis=-1, keepdims=True)
    out = np.einsum("nhs,shd->nhd", probabilities, np.repeat(v64, group, axis=1))
    scores = probabilities.reshape(n, kv_heads, group, slots).sum(axis=(0, 2))
    return out, scores
