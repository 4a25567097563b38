"""kvc.h in ctypes: the structs, the enums' values and every function's signature, one to one.

This file is the only place that knows the C ABI; it mirrors include/kvc/kvc.h in the header's
order, so a change there is a change in the same place here. The Pythonic surface is in
kvc/__init__.py.
"""
from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, Structure, c_char, c_char_p, c_float, c_int, c_int32, c_uint8, c_uint32, c_uint64, c_void_p
from pathlib import Path

# kvc.h's version this file mirrors; the loaded library must have the same major and minor.
VERSION_MAJOR, VERSION_MINOR = 0, 2

status_t = c_int  # kvc_status, kvc_backend, kvc_dtype, kvc_policy, kvc_rope_style: 32-bit enums
STATUS_OK = 0
STATUS_TIMEOUT = 15
CONTEXT_VALIDATION = 0x1
CONTEXT_NO_COOPERATIVE_MATRIX = 0x2
RECENT_WINDOW_DEFAULT = 0xFFFFFFFF
DECODE_SLOTS_DEFAULT = 0


class context_desc(Structure):
    _fields_ = [("struct_size", c_uint32), ("backend", c_int), ("device_index", c_int32), ("flags", c_uint32)]


class vulkan_handles(Structure):
    _fields_ = [("struct_size", c_uint32), ("instance", c_void_p), ("physical_device", c_void_p),
                ("device", c_void_p), ("queue", c_void_p), ("queue_family_index", c_uint32),
                ("get_instance_proc_addr", c_void_p)]


class context_info(Structure):
    _fields_ = [("struct_size", c_uint32), ("backend", c_int), ("device_name", c_char * 256),
                ("vendor_id", c_uint32), ("validation_messages", c_uint32), ("buffer_offset_alignment", c_uint32),
                ("matrix_path", c_int), ("matrix_path_detail", c_char * 160),
                ("work_bytes_held", c_uint64)]


class cache_desc(Structure):
    _fields_ = [("struct_size", c_uint32), ("num_layers", c_uint32), ("num_q_heads", c_uint32),
                ("num_kv_heads", c_uint32), ("head_dim", c_uint32), ("dtype", c_int), ("capacity", c_uint32),
                ("policy", c_int), ("rope_style", c_int), ("rope_theta", c_float), ("rope_dims", c_uint32),
                ("policy_params", c_void_p)]


class eviction_params(Structure):
    _fields_ = [("struct_size", c_uint32), ("sinks", c_uint32), ("recent_window", c_uint32),
                ("chunk_slots", c_uint32), ("layer_capacities", POINTER(c_uint32)), ("prefill_block", c_uint32),
                ("select_left_token", c_uint32)]


class freqkv_params(Structure):
    _fields_ = [("struct_size", c_uint32), ("sink_tokens", c_uint32), ("retain_ratio", c_float), ("recent_tokens", c_uint32)]


class faedkv_params(Structure):
    _fields_ = [("struct_size", c_uint32), ("sinks", c_uint32), ("recent_window", c_uint32), ("chunks", c_uint32),
                ("retain_ratio", c_float), ("chunk_importance", POINTER(c_float)), ("chunk_keep", POINTER(c_uint8))]


class fourier_params(Structure):
    _fields_ = [("struct_size", c_uint32), ("sinks", c_uint32), ("local_window", c_uint32), ("num_states", c_uint32),
                ("window_length", c_uint32), ("key_ratios", POINTER(c_float)), ("value_ratios", POINTER(c_float)),
                ("key_dims", POINTER(c_uint8)), ("value_dims", POINTER(c_uint8))]


class cache_stats(Structure):
    _fields_ = [("struct_size", c_uint32), ("tokens_seen", c_uint64), ("slots_held", c_uint64),
                ("device_bytes_held", c_uint64), ("bytes_per_slot", c_uint64), ("compressions", c_uint64)]


class window_policy_params(Structure):
    _fields_ = [("struct_size", c_uint32), ("budget", c_uint32), ("window", c_uint32), ("pool_kernel", c_uint32),
                ("hit_k", c_uint32), ("hit_threshold", c_float), ("pyramid_beta", c_float),
                ("layer_budgets", POINTER(c_uint32)), ("num_layer_budgets", c_uint32), ("decode_slots", c_uint32)]


class buffer_view(Structure):
    _fields_ = [("buffer", c_void_p), ("offset", c_uint64)]


# name: (result type, argument types). Handles are opaque: c_void_p.
_SIGNATURES = {
    "kvc_version_number": (c_uint32, []),
    "kvc_version_string": (c_char_p, []),
    "kvc_status_name": (c_char_p, [c_int]),
    "kvc_context_desc_default": (context_desc, []),
    "kvc_context_create": (status_t, [POINTER(context_desc), POINTER(c_void_p)]),
    "kvc_context_create_from_vulkan": (status_t, [POINTER(vulkan_handles), POINTER(c_void_p)]),
    "kvc_context_destroy": (None, [c_void_p]),
    "kvc_context_last_error": (c_char_p, [c_void_p]),
    "kvc_last_create_error": (c_char_p, []),
    "kvc_context_info_get": (status_t, [c_void_p, POINTER(context_info)]),
    "kvc_context_trim": (status_t, [c_void_p]),
    "kvc_eviction_params_default": (eviction_params, []),
    "kvc_freqkv_params_default": (freqkv_params, []),
    "kvc_faedkv_params_default": (faedkv_params, []),
    "kvc_fourier_params_default": (fourier_params, []),
    "kvc_cache_desc_default": (cache_desc, []),
    "kvc_cache_create": (status_t, [c_void_p, POINTER(cache_desc), POINTER(c_void_p)]),
    "kvc_cache_destroy": (None, [c_void_p]),
    "kvc_cache_append": (status_t, [c_void_p, c_uint32, c_uint32, c_int, c_void_p, c_void_p]),
    "kvc_attend": (status_t, [c_void_p, c_uint32, c_uint32, c_int, c_void_p, c_void_p, c_void_p]),
    "kvc_cache_layer_slots": (status_t, [c_void_p, c_uint32, POINTER(c_uint32)]),
    "kvc_cache_read": (status_t, [c_void_p, c_uint32, c_uint32, c_int, c_void_p, c_void_p, c_void_p]),
    "kvc_cache_stats_get": (status_t, [c_void_p, POINTER(cache_stats)]),
    "kvc_faedkv_ablate": (status_t, [c_void_p, c_uint32, POINTER(faedkv_params), c_uint32, c_uint32, c_int, c_void_p,
                                     c_void_p]),
    "kvc_window_policy_params_default": (window_policy_params, []),
    "kvc_cache_end_prefill": (status_t, [c_void_p]),
    "kvc_cache_reset": (status_t, [c_void_p]),
    "kvc_buffer_create": (status_t, [c_void_p, c_uint64, POINTER(c_void_p)]),
    "kvc_buffer_wrap_vulkan": (status_t, [c_void_p, c_void_p, c_uint64, c_uint64, POINTER(c_void_p)]),
    "kvc_buffer_destroy": (None, [c_void_p]),
    "kvc_buffer_size": (status_t, [c_void_p, POINTER(c_uint64)]),
    "kvc_buffer_write": (status_t, [c_void_p, c_uint64, c_uint64, c_void_p]),
    "kvc_buffer_read": (status_t, [c_void_p, c_uint64, c_uint64, c_void_p]),
    "kvc_cache_append_device": (status_t, [c_void_p, c_uint32, c_uint32, c_int, buffer_view, buffer_view]),
    "kvc_attend_device": (status_t, [c_void_p, c_uint32, c_uint32, c_int, buffer_view, buffer_view, buffer_view]),
    "kvc_decode_device": (status_t, [c_void_p, c_uint32, c_int, buffer_view, buffer_view, buffer_view, buffer_view]),
    "kvc_attend_batch_device": (status_t, [c_void_p, c_uint32, POINTER(c_void_p), c_uint32, c_int, POINTER(buffer_view),
                                           POINTER(buffer_view), POINTER(buffer_view)]),
    "kvc_cache_append_batch_device": (status_t, [c_void_p, c_uint32, POINTER(c_void_p), c_uint32, c_uint32, c_int,
                                                 POINTER(buffer_view), POINTER(buffer_view)]),
    "kvc_step_begin": (status_t, [c_void_p]),
    "kvc_step_begin_commands": (status_t, [c_void_p, c_void_p]),
    "kvc_step_end": (status_t, [c_void_p]),
    "kvc_step_wait": (status_t, [c_void_p, c_uint64]),
}


def _library_path() -> str:
    """libkvc.so installed beside this file by the wheel, or $KVC_LIBRARY (a build tree's)."""
    override = os.environ.get("KVC_LIBRARY")
    if override:
        return override
    here = Path(__file__).resolve().parent
    for name in ("libkvc.so", "libkvc.so.0", "libkvc.dylib", "kvc.dll"):
        if (here / name).exists():
            return str(here / name)
    raise ImportError(f"libkvc was not found in {here}; install the package with pip, or set KVC_LIBRARY "
                      "to a libkvc.so built with -DBUILD_SHARED_LIBS=ON")


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(_library_path())
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    number = lib.kvc_version_number()
    if (number // 10000, number // 100 % 100) != (VERSION_MAJOR, VERSION_MINOR):
        raise ImportError(f"libkvc {lib.kvc_version_string().decode()} was loaded; these bindings mirror "
                          f"kvc.h {VERSION_MAJOR}.{VERSION_MINOR}")
    return lib


lib = _load()
