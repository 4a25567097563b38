"""libkvc from Python: a compressed KV cache for LLM inference with attention computed over it.

    import numpy as np, kvc
    with kvc.Context(backend=kvc.Backend.AUTO) as ctx, \\
         kvc.Cache(ctx, layers=1, q_heads=8, kv_heads=2, head_dim=64, capacity=4096,
                   policy=kvc.Policy.SNAPKV, params=kvc.WindowParams(budget=256)) as cache:
        cache.append(0, k, v)              # k, v: [n, kv_heads, head_dim], float32 or float16
        out = cache.attend(0, q)           # q: [n, q_heads, head_dim] -> out, same shape
        cache.end_prefill()

Why ctypes: the package is kvc.h one to one (kvc/_capi.py) over the shared library that the
wheel's CMake build installs beside it, with no compiled glue of its own to build, keep in sync or
debug; ctypes releases the GIL during each call, and a per-context lock keeps kvc.h's rule that a
context and its caches, buffers and steps are used from one thread at a time. Arrays cross without
a copy: NumPy arrays by pointer, PyTorch CPU tensors through DLPack (np.from_dlpack).

Every failed call raises a subclass of kvc.Error named after its kvc_status, carrying the
context's last-error message; a failed call changes nothing (kvc.h's rule).
"""
from __future__ import annotations

import ctypes
import dataclasses
import enum
import threading
import weakref
from typing import Any, ClassVar, Optional, Sequence, Tuple, Type, Union

import numpy as np

from . import _capi
from ._capi import lib

__all__ = [
    "Error", "InvalidArgumentError", "NullPointerError", "OutOfRangeError", "DTypeMismatchError",
    "NotFiniteError", "BadStateError", "CapacityError", "BufferTooSmallError", "NoVulkanLoaderError",
    "NoDeviceError", "VulkanError", "OutOfMemoryError", "UnsupportedError", "InternalError",
    "DeviceLostError", "Backend", "DType", "Policy", "RopeStyle", "EvictionParams", "WindowParams", "FreqKVParams", "FaedKVParams",
    "FourierParams", "ContextInfo", "CacheStats", "Context", "Cache", "Buffer", "BufferView", "version",
    "RECENT_WINDOW_DEFAULT", "DECODE_SLOTS_DEFAULT",
]

RECENT_WINDOW_DEFAULT = _capi.RECENT_WINDOW_DEFAULT
DECODE_SLOTS_DEFAULT = _capi.DECODE_SLOTS_DEFAULT
ArrayLike = Any  # a NumPy array, a PyTorch CPU tensor, or anything np.asarray / np.from_dlpack takes


def version() -> str:
    """The version of the loaded libkvc, "MAJOR.MINOR.PATCH"."""
    return lib.kvc_version_string().decode()


# ---------------------------------------------------------------- errors


class Error(Exception):
    """A libkvc call failed. `status` is the kvc_status value, `status_name` its name in kvc.h,
    and the message is the context's last-error detail (which argument, which limit)."""

    status: int = -1

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        if status is not None:
            self.status = status

    @property
    def status_name(self) -> str:
        return lib.kvc_status_name(self.status).decode()


def _error_class(name: str, status: int, doc: str) -> Type[Error]:
    return type(name, (Error,), {"status": status, "__doc__": doc})


InvalidArgumentError = _error_class("InvalidArgumentError", 1, "A value out of its documented range.")
NullPointerError = _error_class("NullPointerError", 2, "A required pointer or handle is missing.")
OutOfRangeError = _error_class("OutOfRangeError", 3, "An index (layer, device) past its bound.")
DTypeMismatchError = _error_class("DTypeMismatchError", 4, "Data in a dtype the cache does not store.")
NotFiniteError = _error_class("NotFiniteError", 5, "Input holds NaN or Inf.")
BadStateError = _error_class("BadStateError", 6, "Calls out of order, or a closed handle.")
CapacityError = _error_class("CapacityError", 7, "The cache cannot hold what was asked.")
BufferTooSmallError = _error_class("BufferTooSmallError", 8, "A buffer or view is smaller than its data.")
NoVulkanLoaderError = _error_class("NoVulkanLoaderError", 9, "libvulkan.so.1 could not be loaded.")
NoDeviceError = _error_class("NoDeviceError", 10, "The Vulkan loader found no usable device.")
VulkanError = _error_class("VulkanError", 11, "A Vulkan call failed; the message names it.")
OutOfMemoryError = _error_class("OutOfMemoryError", 12, "Host or device memory exhausted.")
UnsupportedError = _error_class("UnsupportedError", 13, "Valid, but this build or device cannot do it.")
InternalError = _error_class("InternalError", 14, "A bug in libkvc: please report it.")
DeviceLostError = _error_class("DeviceLostError", 16, "The Vulkan device was lost; the context refuses all work.")
_ERRORS = {cls.status: cls for cls in (
    InvalidArgumentError, NullPointerError, OutOfRangeError, DTypeMismatchError, NotFiniteError, BadStateError,
    CapacityError, BufferTooSmallError, NoVulkanLoaderError, NoDeviceError, VulkanError, OutOfMemoryError,
    UnsupportedError, InternalError, DeviceLostError)}


def _raise_for(status: int, message: str) -> None:
    raise _ERRORS.get(status, Error)(message or lib.kvc_status_name(status).decode(), status)


# ---------------------------------------------------------------- enums and parameters


class Backend(enum.IntEnum):
    """kvc_backend: AUTO is Vulkan if a device exists, else the CPU reference."""
    AUTO = 0
    VULKAN = 1
    CPU = 2


class DType(enum.IntEnum):
    """kvc_dtype: storage and I/O dtype of a cache (accumulation is always f32)."""
    F32 = 0
    F16 = 1

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(np.float32 if self is DType.F32 else np.float16)

    @classmethod
    def of(cls, value: Union["DType", str, type, np.dtype]) -> "DType":
        if isinstance(value, DType):
            return value
        name = np.dtype(value).name
        if name not in ("float32", "float16"):
            raise DTypeMismatchError(f"libkvc stores float32 or float16, not {name}")
        return cls.F32 if name == "float32" else cls.F16


class RopeStyle(enum.IntEnum):
    """kvc_rope_style: RoPE applied inside libkvc to keys and queries that arrive before RoPE (or NONE).
    FULL stores keys rotated; the other policies rotate them as attention reads them (kvc.h)."""
    NONE = 0
    NEOX = 1
    INTERLEAVED = 2


class _Params:
    """A policy's parameter struct: every field left None keeps the default that kvc.h's
    *_default() function sets; a table field takes any sequence or array, flattened in C order
    into the C table's element type (kept alive until the cache is created)."""

    _default_function: ClassVar[str]
    _table_counts: ClassVar[dict] = {}  # table field -> the field holding its length

    def _to_c(self) -> Tuple[ctypes.Structure, list]:
        struct = getattr(lib, self._default_function)()
        c_types = dict(struct._fields_)
        keep_alive = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            c_type = c_types[field.name]
            if issubclass(c_type, ctypes._Pointer):
                values = np.asarray(value).ravel().tolist()
                table = (c_type._type_ * len(values))(*values)
                keep_alive.append(table)
                setattr(struct, field.name, ctypes.cast(table, c_type))
                if field.name in self._table_counts:
                    setattr(struct, self._table_counts[field.name], len(values))
            else:
                setattr(struct, field.name, value)
        return struct, keep_alive


@dataclasses.dataclass
class EvictionParams(_Params):
    """kvc_eviction_params (STREAMING, H2O, TOVA, TREEKV): `capacity` is the cache size each layer
    holds after every attend; `chunk_slots` is the room for one append beyond it (a prompt longer
    than the cache). None keeps kvc_eviction_params_default()'s value."""
    sinks: Optional[int] = None
    recent_window: Optional[int] = None
    chunk_slots: Optional[int] = None
    layer_capacities: Optional[Sequence[int]] = None
    prefill_block: Optional[int] = None
    select_left_token: Optional[int] = None
    _default_function = "kvc_eviction_params_default"


@dataclasses.dataclass
class WindowParams(_Params):
    """kvc_window_policy_params (SNAPKV, PYRAMIDKV, HITKV, PHITKV): at end_prefill() each layer
    keeps `budget` tokens, the last `window` prompt tokens included. None keeps
    kvc_window_policy_params_default()'s value."""
    budget: Optional[int] = None
    window: Optional[int] = None
    pool_kernel: Optional[int] = None
    hit_k: Optional[int] = None
    hit_threshold: Optional[float] = None
    pyramid_beta: Optional[float] = None
    layer_budgets: Optional[Sequence[int]] = None
    decode_slots: Optional[int] = None
    _default_function = "kvc_window_policy_params_default"
    _table_counts = {"layer_budgets": "num_layer_budgets"}


@dataclasses.dataclass
class FreqKVParams(_Params):
    """kvc_freqkv_params (FREQKV): `capacity` is the window N; when a layer holds N slots the
    slots between the first `sink_tokens` and the last `recent_tokens` keep the lowest
    `retain_ratio` share of their DCT components, and the recent tokens follow them unchanged
    (0 recent tokens is the paper; its authors' code keeps 8, with 8 sinks)."""
    sink_tokens: Optional[int] = None
    retain_ratio: Optional[float] = None
    recent_tokens: Optional[int] = None
    _default_function = "kvc_freqkv_params_default"


@dataclasses.dataclass
class FaedKVParams(_Params):
    """kvc_faedkv_params (FAEDKV): at end_prefill() each layer's prompt keeps `sinks` and
    `recent_window` tokens exactly and its middle as the kept chunks of its DFT along the
    sequence; `chunk_importance` ([layers][chunks] floats) or `chunk_keep` ([layers][chunks],
    nonzero keeps) choose the chunks. Keys arrive already rotated (no libkvc RoPE)."""
    sinks: Optional[int] = None
    recent_window: Optional[int] = None
    chunks: Optional[int] = None
    retain_ratio: Optional[float] = None
    chunk_importance: Optional[Sequence[float]] = None
    chunk_keep: Optional[Sequence[int]] = None
    _default_function = "kvc_faedkv_params_default"


@dataclasses.dataclass
class FourierParams(_Params):
    """kvc_fourier_params (FOURIER, FourierAttention): once a layer holds more than `sinks` +
    2 `num_states` + `local_window` tokens after end_prefill(), its middle's chosen head dims
    become 2 `num_states` Fourier coefficients over the window of `window_length` tokens (0:
    capacity). `key_ratios` / `value_ratios` ([layers] floats in (0, 1)) set the share of dims
    compressed, or `key_dims` / `value_dims` ([layers][kv_heads][head_dim], nonzero compresses)
    name them. Keys arrive already rotated (no libkvc RoPE); once compressed, attend() takes one
    query and gives no scores."""
    sinks: Optional[int] = None
    local_window: Optional[int] = None
    num_states: Optional[int] = None
    window_length: Optional[int] = None
    key_ratios: Optional[Sequence[float]] = None
    value_ratios: Optional[Sequence[float]] = None
    key_dims: Optional[Sequence[int]] = None
    value_dims: Optional[Sequence[int]] = None
    _default_function = "kvc_fourier_params_default"


class Policy(enum.IntEnum):
    """kvc_policy; kvc.h documents each. A new policy is one line here: its kvc.h value and its
    parameter class (None when it takes none)."""

    def __new__(cls, value: int, params_class: Optional[type] = None) -> "Policy":
        member = int.__new__(cls, value)
        member._value_ = value
        member.params_class = params_class
        return member

    FULL = 0, None
    STREAMING = 1, EvictionParams
    H2O = 2, EvictionParams
    TOVA = 3, EvictionParams
    TREEKV = 4, EvictionParams
    SNAPKV = 5, WindowParams
    PYRAMIDKV = 6, WindowParams
    HITKV = 7, WindowParams
    PHITKV = 8, WindowParams
    FREQKV = 9, FreqKVParams
    FAEDKV = 10, FaedKVParams
    FOURIER = 11, FourierParams


@dataclasses.dataclass(frozen=True)
class ContextInfo:
    """kvc_context_info: the context's device."""
    backend: Backend
    device_name: str
    vendor_id: int
    validation_messages: int
    buffer_offset_alignment: int
    cooperative_matrix: bool  # kvc_matrix_path: True where prefill attention runs on cooperative matrices
    matrix_path_detail: str   # the matrix shape taken, or why SIMT
    work_bytes_held: int      # memory kept between calls for the kernels' work and for reuse (Context.trim gives it back)


@dataclasses.dataclass(frozen=True)
class CacheStats:
    """kvc_cache_stats: counters and memory of a cache (kvc.h says what each counts)."""
    tokens_seen: int
    slots_held: int
    device_bytes_held: int
    bytes_per_slot: int
    compressions: int


# ---------------------------------------------------------------- arrays


def _as_array(value: ArrayLike) -> np.ndarray:
    """A NumPy view of `value` without a copy: DLPack for tensors (PyTorch), np.asarray otherwise."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (RuntimeError, TypeError, BufferError) as error:  # bfloat16, a CUDA tensor, requires_grad
            dtype = str(getattr(value, "dtype", ""))
            kind = InvalidArgumentError if dtype.split(".")[-1] in ("float32", "float16") else DTypeMismatchError
            raise kind(f"{type(value).__name__} of {dtype or 'unknown dtype'} cannot be shared with libkvc "
                       f"without a copy: {error}") from error
    return np.asarray(value)


def _tokens(value: ArrayLike, heads: int, head_dim: int, what: str, dtype: Optional[DType] = None,
            writable: bool = False) -> Tuple[np.ndarray, int, DType]:
    """Checks that `value` is a C-contiguous [..., n, heads, head_dim] array of f32 or f16 and
    returns it with n and its dtype; libkvc reads or writes it in place."""
    array = _as_array(value)
    array_dtype = DType.of(array.dtype)
    if dtype is not None and array_dtype != dtype:
        raise DTypeMismatchError(f"{what} is {array.dtype}, the cache stores {dtype.numpy}")
    if array.ndim < 2 or array.shape[-2:] != (heads, head_dim) or array.size == 0:
        raise InvalidArgumentError(f"{what} has shape {array.shape}; expected [..., n, {heads}, {head_dim}] with n >= 1")
    if not array.flags.c_contiguous:
        if writable:
            raise InvalidArgumentError(f"{what} must be C-contiguous: libkvc writes it in place")
        array = np.ascontiguousarray(array)
    if writable and not array.flags.writeable:
        raise InvalidArgumentError(f"{what} is read-only")
    return array, array.size // (heads * head_dim), array_dtype


def _pointer(array: Optional[np.ndarray]) -> Optional[int]:
    return None if array is None else array.ctypes.data


# ---------------------------------------------------------------- context


class _Owned:
    """A libkvc handle owned by a Python object: closed by close(), by leaving a `with` block or
    by the garbage collector; once closed, using it raises BadStateError."""

    _noun = "handle"
    _handle: Optional[int] = None

    @property
    def handle(self) -> int:
        """The libkvc handle as an integer."""
        if self._handle is None:
            raise BadStateError(f"the {self._noun} is closed", BadStateError.status)
        return self._handle

    def close(self) -> None:
        if self._handle is not None:
            self._release()
            self._handle = None

    def _release(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()


class Context(_Owned):
    """kvc_context: a device (Vulkan or the CPU reference) and everything made on it.

    Use it as a context manager, or call close(); closing it closes its caches and buffers first.
    Calls on a context and its caches and buffers are serialised by a lock, as kvc.h asks."""

    _noun = "context"

    def __init__(self, backend: Backend = Backend.AUTO, device_index: int = -1, validation: bool = False,
                 cooperative_matrix: bool = True):
        """cooperative_matrix=False keeps the Vulkan kernels on SIMT where the device has cooperative
        matrices (KVC_CONTEXT_NO_COOPERATIVE_MATRIX)."""
        desc = lib.kvc_context_desc_default()
        desc.backend = Backend(backend)
        desc.device_index = device_index
        desc.flags = ((_capi.CONTEXT_VALIDATION if validation else 0) |
                      (0 if cooperative_matrix else _capi.CONTEXT_NO_COOPERATIVE_MATRIX))
        handle = ctypes.c_void_p()
        status = lib.kvc_context_create(ctypes.byref(desc), ctypes.byref(handle))
        if status != _capi.STATUS_OK:
            _raise_for(status, lib.kvc_last_create_error().decode())
        self._init(handle)

    @classmethod
    def from_vulkan(cls, instance: int, physical_device: int, device: int, queue: int, queue_family_index: int,
                    get_instance_proc_addr: Optional[int] = None) -> "Context":
        """kvc_context_create_from_vulkan: a context over an application's Vulkan objects, given
        as integer handles. The application keeps ownership: close this context first."""
        handles = _capi.vulkan_handles(ctypes.sizeof(_capi.vulkan_handles), instance, physical_device, device, queue,
                                       queue_family_index, get_instance_proc_addr)
        handle = ctypes.c_void_p()
        status = lib.kvc_context_create_from_vulkan(ctypes.byref(handles), ctypes.byref(handle))
        if status != _capi.STATUS_OK:
            _raise_for(status, lib.kvc_last_create_error().decode())
        context = cls.__new__(cls)
        context._init(handle)
        return context

    def _init(self, handle: ctypes.c_void_p) -> None:
        self._handle: Optional[int] = handle.value
        self._lock = threading.RLock()
        self._children: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._in_step = False
        self._step_outputs: list = []  # host outputs of the open or last ended step, alive until its wait

    def _call(self, name: str, *args: Any) -> int:
        """Calls kvc.h's `name` under the lock; raises the status's Error with the last-error detail."""
        with self._lock:
            status = getattr(lib, name)(*args)
            if status != _capi.STATUS_OK and status != _capi.STATUS_TIMEOUT:
                _raise_for(status, lib.kvc_context_last_error(self.handle).decode())
            return status

    @property
    def info(self) -> ContextInfo:
        """kvc_context_info_get."""
        info = _capi.context_info(struct_size=ctypes.sizeof(_capi.context_info))
        self._call("kvc_context_info_get", self.handle, ctypes.byref(info))
        return ContextInfo(Backend(info.backend), info.device_name.decode(), info.vendor_id, info.validation_messages,
                           info.buffer_offset_alignment, info.matrix_path == 1, info.matrix_path_detail.decode(),
                           info.work_bytes_held)

    def trim(self) -> None:
        """kvc_context_trim: frees the work memory no cache holds (scratch, FFT plans, device memory
        kept for reuse)."""
        self._call("kvc_context_trim", self.handle)

    def buffer(self, nbytes: int) -> "Buffer":
        """kvc_buffer_create: `nbytes` of device memory (host memory on the CPU backend)."""
        return Buffer(self, nbytes)

    def step_begin(self) -> None:
        """kvc_step_begin: from now on calls on this context record into one submission."""
        self._call("kvc_step_begin", self.handle)
        self._in_step = True

    def step_end(self) -> None:
        """kvc_step_end: submits the open step without waiting."""
        try:
            self._call("kvc_step_end", self.handle)
        finally:
            self._in_step = False

    def step_wait(self, timeout_ns: Optional[int] = None) -> bool:
        """kvc_step_wait: True when the last ended step finished (its host outputs, the arrays
        returned by attend() and read() inside it, are written now); False when `timeout_ns`
        passed first (0 polls). None waits as long as it takes."""
        timeout = 0xFFFFFFFFFFFFFFFF if timeout_ns is None else timeout_ns
        done = self._call("kvc_step_wait", self.handle, timeout) == _capi.STATUS_OK
        if done:
            self._step_outputs.clear()
        return done

    def _keep_until_wait(self, *arrays: Optional[np.ndarray]) -> None:
        """Inside a step libkvc writes host outputs when the step finishes: keep them alive till then."""
        if self._in_step:
            self._step_outputs.extend(a for a in arrays if a is not None)

    def attend_batch_device(self, caches: Sequence["Cache"], layer: int, q: Sequence[BufferView],
                            out: Sequence[BufferView], scores: Optional[Sequence[Optional[BufferView]]] = None) -> None:
        """kvc_attend_batch_device: one decode step of `layer` for every cache of `caches` at once,
        as caches[i].attend_device(layer, 1, q[i], out[i], scores[i]) would (scores optional, an
        entry None for none); the plain-attention caches share one batched kernel."""
        count = len(caches)
        if len(q) != count or len(out) != count or (scores is not None and len(scores) != count):
            raise InvalidArgumentError(f"{count} caches need as many q, out (and scores) views", InvalidArgumentError.status)
        if count == 0:
            raise InvalidArgumentError("attend_batch_device needs at least one cache", InvalidArgumentError.status)
        dtype = caches[0].dtype
        handles = (ctypes.c_void_p * count)(*(cache.handle for cache in caches))
        q_views = (_capi.buffer_view * count)(*(view._to_c() for view in q))
        out_views = (_capi.buffer_view * count)(*(view._to_c() for view in out))
        score_views = None
        if scores is not None:
            score_views = (_capi.buffer_view * count)(*(view._to_c() if view is not None else _NO_VIEW for view in scores))
        self._call("kvc_attend_batch_device", self.handle, count, handles, layer, dtype, q_views, out_views, score_views)

    def append_batch_device(self, caches: Sequence["Cache"], layer: int, n_tokens: int, k: Sequence[BufferView],
                            v: Sequence[BufferView]) -> None:
        """kvc_cache_append_batch_device: a chunk of n_tokens appended to `layer` of every cache of
        `caches` at once, as caches[i].append_device(layer, n_tokens, k[i], v[i]) would; the
        chunks land in one batched kernel."""
        count = len(caches)
        if len(k) != count or len(v) != count:
            raise InvalidArgumentError(f"{count} caches need as many k and v views", InvalidArgumentError.status)
        if count == 0:
            raise InvalidArgumentError("append_batch_device needs at least one cache", InvalidArgumentError.status)
        dtype = caches[0].dtype
        handles = (ctypes.c_void_p * count)(*(cache.handle for cache in caches))
        k_views = (_capi.buffer_view * count)(*(view._to_c() for view in k))
        v_views = (_capi.buffer_view * count)(*(view._to_c() for view in v))
        self._call("kvc_cache_append_batch_device", self.handle, count, handles, layer, n_tokens, dtype, k_views, v_views)

    def step(self) -> "_Step":
        """`with ctx.step():` begins a step, and on leaving ends it and waits for it."""
        return _Step(self)

    def _release(self) -> None:
        """Closes the context's caches and buffers, then the context (kvc_context_destroy)."""
        for child in list(self._children):
            child.close()
        with self._lock:
            lib.kvc_context_destroy(self._handle)

    def __repr__(self) -> str:
        if self._handle is None:
            return "<kvc.Context closed>"
        info = self.info
        return f"<kvc.Context {info.backend.name} {info.device_name!r}>"


class _Step:
    def __init__(self, context: Context):
        self._context = context

    def __enter__(self) -> Context:
        self._context.step_begin()
        return self._context

    def __exit__(self, *exc: Any) -> None:
        self._context.step_end()
        self._context.step_wait()


# ---------------------------------------------------------------- buffers


@dataclasses.dataclass(frozen=True)
class BufferView:
    """kvc_buffer_view: a tensor inside a Buffer, `offset` bytes in (a multiple of
    ContextInfo.buffer_offset_alignment)."""
    buffer: "Buffer"
    offset: int = 0

    def _to_c(self) -> _capi.buffer_view:
        return _capi.buffer_view(self.buffer.handle, self.offset)


_NO_VIEW = _capi.buffer_view(None, 0)


class Buffer(_Owned):
    """kvc_buffer: device memory for Q, K, V, outputs and scores (the engine path)."""

    _noun = "buffer"

    def __init__(self, context: Context, nbytes: int, _vk_buffer: Optional[int] = None, _offset: int = 0):
        self.context = context
        handle = ctypes.c_void_p()
        if _vk_buffer is None:
            context._call("kvc_buffer_create", context.handle, nbytes, ctypes.byref(handle))
        else:
            context._call("kvc_buffer_wrap_vulkan", context.handle, _vk_buffer, _offset, nbytes, ctypes.byref(handle))
        self._handle: Optional[int] = handle.value
        context._children.add(self)

    @classmethod
    def wrap_vulkan(cls, context: Context, vk_buffer: int, offset: int, nbytes: int) -> "Buffer":
        """kvc_buffer_wrap_vulkan: `nbytes` of an application's VkBuffer (an integer handle)."""
        return cls(context, nbytes, vk_buffer, offset)

    @property
    def nbytes(self) -> int:
        """kvc_buffer_size."""
        size = ctypes.c_uint64()
        self.context._call("kvc_buffer_size", self.handle, ctypes.byref(size))
        return size.value

    def view(self, offset: int = 0) -> BufferView:
        return BufferView(self, offset)

    def write(self, offset: int, data: ArrayLike) -> None:
        """kvc_buffer_write: copies `data` (any contiguous array) into the buffer at `offset`."""
        array = np.ascontiguousarray(_as_array(data))
        self.context._call("kvc_buffer_write", self.handle, offset, array.nbytes, _pointer(array))

    def read(self, offset: int, out: ArrayLike) -> np.ndarray:
        """kvc_buffer_read into `out` (a writable C-contiguous array; inside a step it is written
        when step_wait() returns True). Returns `out` as a NumPy array."""
        array = _as_array(out)
        if not (array.flags.c_contiguous and array.flags.writeable):
            raise InvalidArgumentError("read() writes into a writable C-contiguous array", InvalidArgumentError.status)
        self.context._call("kvc_buffer_read", self.handle, offset, array.nbytes, _pointer(array))
        self.context._keep_until_wait(array)
        return array

    def _release(self) -> None:
        """kvc_buffer_destroy (work already recorded that uses it keeps its memory alive)."""
        with self.context._lock:
            lib.kvc_buffer_destroy(self._handle)


# ---------------------------------------------------------------- cache


class Cache(_Owned):
    """kvc_cache: the KV cache of one sequence, `layers` layers of `capacity` slots each.

    K and V arrive as [n, kv_heads, head_dim], Q and the output as [n, q_heads, head_dim]
    (a leading batch dimension of 1 is accepted), in the cache's dtype."""

    _noun = "cache"

    def __init__(self, context: Context, *, layers: int, q_heads: int, kv_heads: int, head_dim: int, capacity: int,
                 policy: Policy = Policy.FULL, params: Optional[_Params] = None,
                 dtype: Union[DType, str, type, np.dtype] = DType.F32, rope: RopeStyle = RopeStyle.NONE,
                 rope_theta: float = 10000.0, rope_dims: int = 0):
        policy = Policy(policy)
        expected = policy.params_class
        if params is not None and not isinstance(params, expected or ()):
            wanted = expected.__name__ if expected else "no parameters"
            raise InvalidArgumentError(f"{policy.name} takes {wanted}, not {type(params).__name__}",
                                       InvalidArgumentError.status)
        self.context = context
        self.layers, self.q_heads, self.kv_heads, self.head_dim = layers, q_heads, kv_heads, head_dim
        self.capacity, self.policy, self.dtype = capacity, policy, DType.of(dtype)
        desc = lib.kvc_cache_desc_default()
        desc.num_layers, desc.num_q_heads, desc.num_kv_heads, desc.head_dim = layers, q_heads, kv_heads, head_dim
        desc.dtype, desc.capacity, desc.policy = self.dtype, capacity, policy
        desc.rope_style, desc.rope_theta, desc.rope_dims = RopeStyle(rope), rope_theta, rope_dims
        keep_alive: list = []
        if params is not None:
            struct, keep_alive = params._to_c()
            desc.policy_params = ctypes.cast(ctypes.byref(struct), ctypes.c_void_p)
            keep_alive.append(struct)
        handle = ctypes.c_void_p()
        context._call("kvc_cache_create", context.handle, ctypes.byref(desc), ctypes.byref(handle))
        self._handle: Optional[int] = handle.value
        context._children.add(self)

    def append(self, layer: int, k: ArrayLike, v: ArrayLike) -> None:
        """kvc_cache_append: n new tokens of `layer` (a prefill chunk, or 1 for a decode step)."""
        k_array, n, _ = _tokens(k, self.kv_heads, self.head_dim, "k", self.dtype)
        v_array, n_v, _ = _tokens(v, self.kv_heads, self.head_dim, "v", self.dtype)
        if n_v != n:
            raise InvalidArgumentError(f"k holds {n} tokens, v {n_v}", InvalidArgumentError.status)
        self.context._call("kvc_cache_append", self.handle, layer, n, self.dtype, _pointer(k_array), _pointer(v_array))

    def attend(self, layer: int, q: ArrayLike, *, out: Optional[ArrayLike] = None, scores: bool = False
               ) -> Union[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
        """kvc_attend: causal attention of the last len(q) appended tokens of `layer` over the cache.

        Returns the output [n, q_heads, head_dim] (written into `out` when given, e.g. a PyTorch
        tensor, without a copy), and with scores=True also the attention probabilities per kv head
        and slot [kv_heads, slots], summed over each kv head's query heads and the queries. Inside
        a step the arrays are written when Context.step_wait() returns True."""
        q_array, n, _ = _tokens(q, self.q_heads, self.head_dim, "q", self.dtype)
        if out is None:
            out_array = np.empty(q_array.shape, self.dtype.numpy)
        else:
            out_array, n_out, _ = _tokens(out, self.q_heads, self.head_dim, "out", self.dtype, writable=True)
            if n_out != n:
                raise InvalidArgumentError(f"out holds {n_out} tokens, q {n}", InvalidArgumentError.status)
        score_array = np.empty((self.kv_heads, self.layer_slots(layer)), np.float32) if scores else None
        self.context._call("kvc_attend", self.handle, layer, n, self.dtype, _pointer(q_array), _pointer(out_array),
                           _pointer(score_array))
        self.context._keep_until_wait(out_array, score_array)
        return (out_array, score_array) if scores else out_array

    def append_device(self, layer: int, n_tokens: int, k: BufferView, v: BufferView) -> None:
        """kvc_cache_append_device: K and V already in device buffers of this context."""
        self.context._call("kvc_cache_append_device", self.handle, layer, n_tokens, self.dtype, k._to_c(), v._to_c())

    def attend_device(self, layer: int, n_queries: int, q: BufferView, out: BufferView,
                      scores: Optional[BufferView] = None) -> None:
        """kvc_attend_device: Q, the output and optionally the scores in device buffers."""
        self.context._call("kvc_attend_device", self.handle, layer, n_queries, self.dtype, q._to_c(), out._to_c(),
                           scores._to_c() if scores is not None else _NO_VIEW)

    def decode_device(self, layer: int, k: BufferView, v: BufferView, q: BufferView, out: BufferView) -> None:
        """kvc_decode_device: one decode token's K and V appended and its query attended, in one
        call (append_device, then attend_device without scores); FULL, FreqKV and the window
        policies write the token inside the attention's own work on Vulkan."""
        self.context._call("kvc_decode_device", self.handle, layer, self.dtype, k._to_c(), v._to_c(), q._to_c(), out._to_c())

    def layer_slots(self, layer: int) -> int:
        """kvc_cache_layer_slots: slots `layer` holds now."""
        slots = ctypes.c_uint32()
        self.context._call("kvc_cache_layer_slots", self.handle, layer, ctypes.byref(slots))
        return slots.value

    def read(self, layer: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """kvc_cache_read: (k, v, positions) of `layer` as attention sees them, k and v as
        [kv_heads, slots, head_dim] (keys before RoPE) and positions as [kv_heads, slots]."""
        slots = self.layer_slots(layer)
        k = np.empty((self.kv_heads, slots, self.head_dim), self.dtype.numpy)
        v = np.empty_like(k)
        positions = np.empty((self.kv_heads, slots), np.int32)
        self.context._call("kvc_cache_read", self.handle, layer, slots, self.dtype, _pointer(k), _pointer(v),
                           _pointer(positions))
        return k, v, positions

    def faedkv_ablate(self, layer: int, pruned_chunk: int, params: Optional["FaedKVParams"] = None
                      ) -> Tuple[np.ndarray, np.ndarray]:
        """kvc_faedkv_ablate: `layer`'s keys and values ([kv_heads, slots, head_dim], as read())
        with the middle segment rebuilt without chunk `pruned_chunk` of FAEDKV's spectrum (eq. 6),
        for the ablation that gives chunk_importance (eq. 7). params: FAEDKV's sinks, window
        and chunks (None: the defaults)."""
        slots = self.layer_slots(layer)
        k = np.empty((self.kv_heads, slots, self.head_dim), self.dtype.numpy)
        v = np.empty_like(k)
        struct, _tables = params._to_c() if params is not None else (None, [])  # the tables live until the call returns
        self.context._call("kvc_faedkv_ablate", self.handle, layer, None if struct is None else ctypes.byref(struct),
                           pruned_chunk, slots, self.dtype, _pointer(k), _pointer(v))
        return k, v

    @property
    def stats(self) -> CacheStats:
        """kvc_cache_stats_get."""
        stats = _capi.cache_stats(struct_size=ctypes.sizeof(_capi.cache_stats))
        self.context._call("kvc_cache_stats_get", self.handle, ctypes.byref(stats))
        return CacheStats(stats.tokens_seen, stats.slots_held, stats.device_bytes_held, stats.bytes_per_slot,
                          stats.compressions)

    def end_prefill(self) -> None:
        """kvc_cache_end_prefill: the prompt ended; the observation-window policies select, FAEDKV
        transforms the prompt's middle, and FOURIER compresses each layer that holds enough, now."""
        self.context._call("kvc_cache_end_prefill", self.handle)

    def reset(self) -> None:
        """kvc_cache_reset: forgets every token; storage stays allocated."""
        self.context._call("kvc_cache_reset", self.handle)

    def _release(self) -> None:
        """kvc_cache_destroy."""
        with self.context._lock:
            lib.kvc_cache_destroy(self._handle)

    def __repr__(self) -> str:
        return (f"<kvc.Cache {self.policy.name} layers={self.layers} q_heads={self.q_heads} kv_heads={self.kv_heads} "
                f"head_dim={self.head_dim} capacity={self.capacity} {self.dtype.name}>")
