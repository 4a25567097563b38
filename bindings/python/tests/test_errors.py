"""Every kvc_status raised as its kvc.Error subclass with the context's message, and a failed
call changing nothing."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import kvc
from kvc import _capi


def _snapshot(cache):
    return cache.stats, [cache.read(layer) for layer in range(cache.layers)]


def _assert_same(before, after):
    assert before[0] == after[0]
    for a, b in zip(before[1], after[1]):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


@pytest.fixture
def cache(context, rng):
    with kvc.Cache(context, layers=2, q_heads=4, kv_heads=2, head_dim=16, capacity=8) as cache:
        for layer in range(2):
            k = rng.standard_normal((3, 2, 16)).astype(np.float32)
            cache.append(layer, k, k)
            cache.attend(layer, rng.standard_normal((3, 4, 16)).astype(np.float32))
        yield cache


def _kv(n, dtype=np.float32):
    return np.ones((n, 2, 16), dtype)


@pytest.mark.parametrize("call,error", [
    (lambda c: c.append(2, _kv(1), _kv(1)), kvc.OutOfRangeError),
    (lambda c: c.append(0, _kv(6), _kv(6)), kvc.CapacityError),
    (lambda c: c.append(0, _kv(1) * np.nan, _kv(1)), kvc.NotFiniteError),
    (lambda c: c.append(0, _kv(1, np.float16), _kv(1, np.float16)), kvc.DTypeMismatchError),
    (lambda c: c.append(0, _kv(1, np.float64), _kv(1, np.float64)), kvc.DTypeMismatchError),
    (lambda c: c.append(0, np.ones((1, 3, 16), np.float32), np.ones((1, 3, 16), np.float32)), kvc.InvalidArgumentError),
    (lambda c: c.append(0, _kv(2), _kv(1)), kvc.InvalidArgumentError),
    (lambda c: c.attend(0, np.ones((4, 4, 16), np.float32)), kvc.BadStateError),
    (lambda c: c.attend(0, np.ones((1, 4, 16), np.float32), out=np.ones((2, 4, 16), np.float32)), kvc.InvalidArgumentError),
    (lambda c: c.layer_slots(5), kvc.OutOfRangeError),
], ids=["layer", "capacity", "nan", "f16-into-f32", "f64", "heads", "k-v-lengths", "too-many-queries", "out-shape",
        "slots-layer"])
def test_bad_input_raises_and_changes_nothing(cache, call, error):
    before = _snapshot(cache)
    with pytest.raises(error) as raised:
        call(cache)
    assert str(raised.value), "every error carries a message"
    assert raised.value.status == error.status
    _assert_same(before, _snapshot(cache))
    cache.append(0, _kv(1), _kv(1))  # the cache still works


def test_status_maps_to_class_and_name(context):
    with pytest.raises(kvc.InvalidArgumentError) as raised:
        kvc.Cache(context, layers=1, q_heads=4, kv_heads=2, head_dim=12, capacity=8)  # head_dim: multiple of 8
    assert raised.value.status_name == "KVC_ERROR_INVALID_ARGUMENT"
    assert "head_dim" in str(raised.value)
    assert isinstance(raised.value, kvc.Error)
    for status in range(1, 15):
        assert kvc._ERRORS[status].status == status
        assert lib_name(status) == kvc._ERRORS[status](" ").status_name


def lib_name(status):
    return _capi.lib.kvc_status_name(status).decode()


def test_wrong_parameters_for_the_policy(context):
    with pytest.raises(kvc.InvalidArgumentError, match="SNAPKV takes WindowParams"):
        kvc.Cache(context, layers=1, q_heads=4, kv_heads=2, head_dim=16, capacity=8, policy=kvc.Policy.SNAPKV,
                  params=kvc.EvictionParams())
    with pytest.raises(kvc.InvalidArgumentError, match="budget"):
        kvc.Cache(context, layers=1, q_heads=4, kv_heads=2, head_dim=16, capacity=64, policy=kvc.Policy.SNAPKV,
                  params=kvc.WindowParams(budget=100))


def test_closed_handles_raise(context):
    cache = kvc.Cache(context, layers=1, q_heads=4, kv_heads=2, head_dim=16, capacity=8)
    with cache:
        pass
    with pytest.raises(kvc.BadStateError, match="closed"):
        cache.append(0, _kv(1), _kv(1))
    buffer = context.buffer(64)
    context.close()
    with pytest.raises(kvc.BadStateError, match="closed"):
        buffer.nbytes
    with pytest.raises(kvc.BadStateError, match="closed"):
        context.info


def test_no_device_error_names_the_device():
    with pytest.raises(kvc.Error) as raised:
        kvc.Context(backend=kvc.Backend.VULKAN, device_index=1000)
    assert isinstance(raised.value, (kvc.OutOfRangeError, kvc.NoDeviceError, kvc.NoVulkanLoaderError))
    assert str(raised.value)


@pytest.mark.parametrize("struct,default", [
    (_capi.context_desc, "kvc_context_desc_default"), (_capi.cache_desc, "kvc_cache_desc_default"),
    (_capi.eviction_params, "kvc_eviction_params_default"), (_capi.freqkv_params, "kvc_freqkv_params_default"),
    (_capi.window_policy_params, "kvc_window_policy_params_default"),
])
def test_structs_match_kvc_h(struct, default):
    """The *_default() functions set struct_size to the C sizeof: the ctypes mirror must agree."""
    assert getattr(_capi.lib, default)().struct_size == ctypes.sizeof(struct)


def test_context_info_names_the_matrix_path():
    # The CPU backend multiplies on the CPU; a Vulkan context says its path and why.
    with kvc.Context(backend=kvc.Backend.CPU) as cpu:
        assert not cpu.info.cooperative_matrix
        assert cpu.info.matrix_path_detail.startswith("SIMT: ")


def test_context_opts_out_of_cooperative_matrices(vulkan_context):
    with kvc.Context(backend=kvc.Backend.VULKAN, cooperative_matrix=False) as ctx:
        assert not ctx.info.cooperative_matrix
        assert "turned off" in ctx.info.matrix_path_detail


def test_context_trim_gives_back_work_memory(vulkan_context, rng):
    cache = kvc.Cache(vulkan_context, layers=1, q_heads=4, kv_heads=2, head_dim=32, capacity=300)
    k, v = rng.standard_normal((2, 257, 2, 32)).astype("float32")
    cache.append(0, k, v)
    cache.attend(0, rng.standard_normal((257, 4, 32)).astype("float32"))
    held = vulkan_context.info.work_bytes_held
    assert held > 0
    vulkan_context.trim()
    assert vulkan_context.info.work_bytes_held < held
