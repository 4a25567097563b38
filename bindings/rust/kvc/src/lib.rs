//! libkvc from Rust: a compressed key/value cache for LLM inference, with attention computed
//! over it on any Vulkan device (or Mesa's lavapipe) or on the CPU reference.
//!
//! A safe layer over the C API (`include/kvc/kvc.h`, raw in the `kvc-sys` crate): handles free
//! themselves (RAII), every call returns [`Result`] with the status and the context's last-error
//! message, tensors are slices (`f32`, or `u16` holding IEEE binary16 bits for an f16 cache).
//!
//! ```
//! use kvc::{Backend, CacheDesc, Context, Policy, WindowParams};
//! # fn main() -> kvc::Result<()> {
//! let ctx = Context::new(Backend::Cpu)?;               // Backend::Auto: Vulkan if present
//! let mut cache = ctx.cache(&CacheDesc {
//!     layers: 1, q_heads: 4, kv_heads: 2, head_dim: 16, capacity: 128,
//!     policy: Policy::SnapKv(WindowParams { budget: 32, window: 8, ..Default::default() }),
//!     ..Default::default()
//! })?;
//! let k = vec![0.5f32; 100 * 2 * 16];                  // [tokens][kv_heads][head_dim]
//! cache.append(0, &k, &k)?;
//! let q = vec![0.1f32; 100 * 4 * 16];                  // [tokens][q_heads][head_dim]
//! let mut out = vec![0f32; q.len()];
//! cache.attend(0, &q, &mut out)?;
//! cache.end_prefill()?;                                // SnapKV keeps 32 of the 100 tokens
//! assert_eq!(cache.layer_slots(0)?, 32);
//! # Ok(()) }
//! ```
//!
//! Threading (kvc.h: "a context and its caches, buffers and steps may be used from one thread at
//! a time"): a [`Context`] is `Send` but not `Sync`; caches, buffers and steps borrow it, so
//! they are neither, and the whole group moves between threads only together, as a context
//! with nothing borrowing it.
//!
//! ```compile_fail
//! // A cache borrows its context, which is not Sync: the cache cannot leave its thread alone.
//! fn assert_send<T: Send>(_: &T) {}
//! let ctx = kvc::Context::new(kvc::Backend::Cpu).unwrap();
//! let cache = ctx.cache(&kvc::CacheDesc::default()).unwrap();
//! assert_send(&cache);
//! ```
//! ```compile_fail
//! fn assert_sync<T: Sync>() {}
//! assert_sync::<kvc::Context>();
//! ```
//!
//! The engine path: [`Buffer`]s hold tensors on the device, and a [`Step`] records many calls
//! into one submission. Inside a step libkvc would write host outputs only when the step
//! finishes, after their borrow may have ended, so this crate refuses host outputs while a step
//! is open: results go to device buffers and are read after the step.
use std::cell::Cell;
use std::ffi::{c_void, CStr};
use std::fmt;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};

use kvc_sys as sys;

// ---------------------------------------------------------------- errors

/// A failed call's `kvc_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    InvalidArgument,
    NullPointer,
    OutOfRange,
    DtypeMismatch,
    NotFinite,
    BadState,
    Capacity,
    BufferTooSmall,
    NoVulkanLoader,
    NoDevice,
    Vulkan,
    OutOfMemory,
    Unsupported,
    Internal,
    DeviceLost,
    /// A value this crate does not know (a newer libkvc).
    Other(i32),
}

impl Status {
    fn from_raw(status: sys::kvc_status) -> Status {
        match status {
            sys::KVC_ERROR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::KVC_ERROR_NULL_POINTER => Status::NullPointer,
            sys::KVC_ERROR_OUT_OF_RANGE => Status::OutOfRange,
            sys::KVC_ERROR_DTYPE_MISMATCH => Status::DtypeMismatch,
            sys::KVC_ERROR_NOT_FINITE => Status::NotFinite,
            sys::KVC_ERROR_BAD_STATE => Status::BadState,
            sys::KVC_ERROR_CAPACITY => Status::Capacity,
            sys::KVC_ERROR_BUFFER_TOO_SMALL => Status::BufferTooSmall,
            sys::KVC_ERROR_NO_VULKAN_LOADER => Status::NoVulkanLoader,
            sys::KVC_ERROR_NO_DEVICE => Status::NoDevice,
            sys::KVC_ERROR_VULKAN => Status::Vulkan,
            sys::KVC_ERROR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::KVC_ERROR_UNSUPPORTED => Status::Unsupported,
            sys::KVC_ERROR_INTERNAL => Status::Internal,
            sys::KVC_ERROR_DEVICE_LOST => Status::DeviceLost,
            other => Status::Other(other),
        }
    }

    /// The kvc.h value.
    pub fn raw(self) -> sys::kvc_status {
        match self {
            Status::InvalidArgument => sys::KVC_ERROR_INVALID_ARGUMENT,
            Status::NullPointer => sys::KVC_ERROR_NULL_POINTER,
            Status::OutOfRange => sys::KVC_ERROR_OUT_OF_RANGE,
            Status::DtypeMismatch => sys::KVC_ERROR_DTYPE_MISMATCH,
            Status::NotFinite => sys::KVC_ERROR_NOT_FINITE,
            Status::BadState => sys::KVC_ERROR_BAD_STATE,
            Status::Capacity => sys::KVC_ERROR_CAPACITY,
            Status::BufferTooSmall => sys::KVC_ERROR_BUFFER_TOO_SMALL,
            Status::NoVulkanLoader => sys::KVC_ERROR_NO_VULKAN_LOADER,
            Status::NoDevice => sys::KVC_ERROR_NO_DEVICE,
            Status::Vulkan => sys::KVC_ERROR_VULKAN,
            Status::OutOfMemory => sys::KVC_ERROR_OUT_OF_MEMORY,
            Status::Unsupported => sys::KVC_ERROR_UNSUPPORTED,
            Status::Internal => sys::KVC_ERROR_INTERNAL,
            Status::DeviceLost => sys::KVC_ERROR_DEVICE_LOST,
            Status::Other(raw) => raw,
        }
    }

    /// kvc.h's name for it, e.g. "KVC_ERROR_CAPACITY".
    pub fn name(self) -> &'static str {
        unsafe { CStr::from_ptr(sys::kvc_status_name(self.raw())) }.to_str().unwrap_or("KVC_?")
    }
}

/// A failed call: its status and the detail libkvc (or this crate) gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn c_string(text: *const std::ffi::c_char) -> String {
    if text.is_null() {
        String::new()
    } else {
        unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
    }
}

/// The version of the linked libkvc, "MAJOR.MINOR.PATCH".
pub fn version() -> String {
    c_string(unsafe { sys::kvc_version_string() })
}

// ---------------------------------------------------------------- enums and parameters

/// Where a context runs (`kvc_backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// Vulkan if a device exists, else the CPU.
    #[default]
    Auto,
    Vulkan,
    Cpu,
}

/// A cache's storage and I/O type (`kvc_dtype`); accumulation is always f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DType {
    #[default]
    F32,
    F16,
}

/// The element types tensors are passed in: `f32`, or `u16` holding IEEE binary16 bits.
pub trait Element: Copy + Default + sealed::Sealed {
    const DTYPE: DType;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for u16 {
    const DTYPE: DType = DType::F16;
}
mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for u16 {}
}

fn raw_dtype(dtype: DType) -> sys::kvc_dtype {
    match dtype {
        DType::F32 => sys::KVC_DTYPE_F32,
        DType::F16 => sys::KVC_DTYPE_F16,
    }
}

/// RoPE applied inside libkvc to keys and queries that arrive before it (`kvc_rope_style`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rope {
    #[default]
    None,
    Neox,
    Interleaved,
}

/// `kvc_eviction_params` (STREAMING, H2O, TOVA, TREEKV); `Default` is kvc.h's default.
#[derive(Debug, Clone, PartialEq)]
pub struct EvictionParams {
    pub sinks: u32,
    pub recent_window: u32,
    pub chunk_slots: u32,
    pub layer_capacities: Option<Vec<u32>>,
    pub prefill_block: u32,
    pub select_left_token: bool,
}

impl Default for EvictionParams {
    fn default() -> Self {
        let d = unsafe { sys::kvc_eviction_params_default() };
        EvictionParams { sinks: d.sinks, recent_window: d.recent_window, chunk_slots: d.chunk_slots,
                         layer_capacities: None, prefill_block: d.prefill_block,
                         select_left_token: d.select_left_token != 0 }
    }
}

/// `kvc_window_policy_params` (SNAPKV, PYRAMIDKV, HITKV, PHITKV); `Default` is kvc.h's default
/// (budget 1024: set a budget below the cache's capacity).
#[derive(Debug, Clone, PartialEq)]
pub struct WindowParams {
    pub budget: u32,
    pub window: u32,
    pub pool_kernel: u32,
    pub hit_k: u32,
    pub hit_threshold: f32,
    pub pyramid_beta: f32,
    pub layer_budgets: Option<Vec<u32>>,
    pub decode_slots: u32,
}

impl Default for WindowParams {
    fn default() -> Self {
        let d = unsafe { sys::kvc_window_policy_params_default() };
        WindowParams { budget: d.budget, window: d.window, pool_kernel: d.pool_kernel, hit_k: d.hit_k,
                       hit_threshold: d.hit_threshold, pyramid_beta: d.pyramid_beta, layer_budgets: None,
                       decode_slots: d.decode_slots }
    }
}

/// `kvc_freqkv_params` (FREQKV); `Default` is the paper's: 4 sinks, retain ratio 0.5, no
/// recent tokens (its authors' code keeps 8 recent tokens out of the transform, and 8 sinks).
#[derive(Debug, Clone, PartialEq)]
pub struct FreqKvParams {
    pub sink_tokens: u32,
    pub retain_ratio: f32,
    pub recent_tokens: u32,
}

impl Default for FreqKvParams {
    fn default() -> Self {
        let d = unsafe { sys::kvc_freqkv_params_default() };
        FreqKvParams { sink_tokens: d.sink_tokens, retain_ratio: d.retain_ratio, recent_tokens: d.recent_tokens }
    }
}

/// `kvc_faedkv_params` (FAEDKV); `Default` is the paper's: 10 sinks, 50 recent tokens, 22
/// chunks, retain ratio 0.125, the lowest-frequency chunks. Keys arrive already rotated (a
/// FAEDKV cache refuses libkvc's RoPE).
#[derive(Debug, Clone, PartialEq)]
pub struct FaedKvParams {
    pub sinks: u32,
    pub recent_window: u32,
    pub chunks: u32,
    pub retain_ratio: f32,
    /// `[layers][chunks]`: each layer keeps the chunks of largest importance.
    pub chunk_importance: Option<Vec<f32>>,
    /// `[layers][chunks]`: nonzero keeps the chunk (overrides retain_ratio and chunk_importance).
    pub chunk_keep: Option<Vec<u8>>,
}

impl Default for FaedKvParams {
    fn default() -> Self {
        let d = unsafe { sys::kvc_faedkv_params_default() };
        FaedKvParams { sinks: d.sinks, recent_window: d.recent_window, chunks: d.chunks, retain_ratio: d.retain_ratio,
                       chunk_importance: None, chunk_keep: None }
    }
}

/// `kvc_fourier_params` (FOURIER, FourierAttention); `Default` is the paper's: 4 sinks, a local
/// window of 1024, 512 states, the window length `capacity`, the inverted pyramid of ratios and
/// the dims chosen by reconstruction error. Keys arrive already rotated (a FOURIER cache refuses
/// libkvc's RoPE); once a layer is compressed, `attend` takes one query and gives no scores.
#[derive(Debug, Clone, PartialEq)]
pub struct FourierParams {
    pub sinks: u32,
    pub local_window: u32,
    pub num_states: u32,
    /// T, the translated window; 0 means `capacity`.
    pub window_length: u32,
    /// `[layers]`: the share of K's head dims compressed, each in (0, 1).
    pub key_ratios: Option<Vec<f32>>,
    /// `[layers]`: the same for V.
    pub value_ratios: Option<Vec<f32>>,
    /// `[layers][kv_heads][head_dim]`: nonzero compresses the K dim (overrides key_ratios).
    pub key_dims: Option<Vec<u8>>,
    /// `[layers][kv_heads][head_dim]`: the same for V.
    pub value_dims: Option<Vec<u8>>,
}

impl Default for FourierParams {
    fn default() -> Self {
        let d = unsafe { sys::kvc_fourier_params_default() };
        FourierParams { sinks: d.sinks, local_window: d.local_window, num_states: d.num_states,
                        window_length: d.window_length, key_ratios: None, value_ratios: None, key_dims: None,
                        value_dims: None }
    }
}

/// A policy's parameters as the C struct kvc.h defines for them.
trait PolicyParams {
    fn raw(&self) -> RawParams;
}

impl PolicyParams for EvictionParams {
    fn raw(&self) -> RawParams {
        RawPolicy::eviction(self)
    }
}

impl PolicyParams for WindowParams {
    fn raw(&self) -> RawParams {
        RawPolicy::window(self)
    }
}

impl PolicyParams for FreqKvParams {
    fn raw(&self) -> RawParams {
        RawPolicy::freqkv(self)
    }
}

impl FaedKvParams {
    /// The C struct; its tables point into `self`, which must outlive the call that reads them.
    fn to_raw(&self) -> sys::kvc_faedkv_params {
        let mut raw = unsafe { sys::kvc_faedkv_params_default() };
        raw.sinks = self.sinks;
        raw.recent_window = self.recent_window;
        raw.chunks = self.chunks;
        raw.retain_ratio = self.retain_ratio;
        raw.chunk_importance = self.chunk_importance.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        raw.chunk_keep = self.chunk_keep.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        raw
    }
}

impl PolicyParams for FaedKvParams {
    fn raw(&self) -> RawParams {
        RawParams::FaedKv(self.to_raw())
    }
}

impl PolicyParams for FourierParams {
    fn raw(&self) -> RawParams {
        let mut raw = unsafe { sys::kvc_fourier_params_default() };
        raw.sinks = self.sinks;
        raw.local_window = self.local_window;
        raw.num_states = self.num_states;
        raw.window_length = self.window_length;
        raw.key_ratios = self.key_ratios.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        raw.value_ratios = self.value_ratios.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        raw.key_dims = self.key_dims.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        raw.value_dims = self.value_dims.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        RawParams::Fourier(raw)
    }
}

/// Declares [`Policy`] and its conversion to kvc.h's values from one list.
macro_rules! policies {
    ($($(#[$doc:meta])* $variant:ident($params:ty) = $raw:ident,)*) => {
        /// A `kvc_policy` with its parameters; kvc.h documents each. A new policy is one line in
        /// the `policies!` list below (and a `PolicyParams` impl when its parameters are new).
        #[derive(Debug, Clone, PartialEq, Default)]
        pub enum Policy {
            /// Keep every token up to `capacity`.
            #[default]
            Full,
            $($(#[$doc])* $variant($params),)*
        }

        impl RawPolicy {
            fn new(policy: &Policy) -> RawPolicy {
                match policy {
                    Policy::Full => RawPolicy { policy: sys::KVC_POLICY_FULL, params: RawParams::None },
                    $(Policy::$variant(p) => RawPolicy { policy: sys::$raw, params: p.raw() },)*
                }
            }
        }
    };
}

policies! {
    /// StreamingLLM: sinks and the most recent tokens.
    Streaming(EvictionParams) = KVC_POLICY_STREAMING,
    /// H2O: evict the lowest accumulated attention, per kv head.
    H2O(EvictionParams) = KVC_POLICY_H2O,
    /// TOVA: evict the lowest attention of the current query, per layer.
    Tova(EvictionParams) = KVC_POLICY_TOVA,
    /// TreeKV: tree-shaped eviction scope over averaged attention.
    TreeKv(EvictionParams) = KVC_POLICY_TREEKV,
    /// SnapKV: at the end of the prefill keep the window and the prefix tokens it attends to most.
    SnapKv(WindowParams) = KVC_POLICY_SNAPKV,
    /// PyramidKV: SnapKV's selection under per-layer budgets falling from the first layer.
    PyramidKv(WindowParams) = KVC_POLICY_PYRAMIDKV,
    /// HitKV: keep the prefix tokens often in the window queries' top K.
    HitKv(WindowParams) = KVC_POLICY_HITKV,
    /// HitKV's selection under PyramidKV's per-layer budgets.
    PhitKv(WindowParams) = KVC_POLICY_PHITKV,
    /// FreqKV: compress the cache in the frequency domain when it fills.
    FreqKv(FreqKvParams) = KVC_POLICY_FREQKV,
    /// FAEDKV: the prompt's middle as chosen DFT bins, updated by the Infinite-Window DFT.
    FaedKv(FaedKvParams) = KVC_POLICY_FAEDKV,
    /// FourierAttention: the middle's chosen head dims as HiPPO-FourierT coefficients.
    Fourier(FourierParams) = KVC_POLICY_FOURIER,
}

/// A policy's C parameter struct, alive while the cache is created.
enum RawParams {
    None,
    Eviction(sys::kvc_eviction_params),
    Window(sys::kvc_window_policy_params),
    FreqKv(sys::kvc_freqkv_params),
    FaedKv(sys::kvc_faedkv_params),
    Fourier(sys::kvc_fourier_params),
}

struct RawPolicy {
    policy: sys::kvc_policy,
    params: RawParams,
}

impl RawPolicy {
    // The tables (layer_capacities, layer_budgets) point into the caller's Policy, which
    // outlives the kvc_cache_create call that reads them.
    fn eviction(p: &EvictionParams) -> RawParams {
        let mut raw = unsafe { sys::kvc_eviction_params_default() };
        raw.sinks = p.sinks;
        raw.recent_window = p.recent_window;
        raw.chunk_slots = p.chunk_slots;
        raw.layer_capacities = p.layer_capacities.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        raw.prefill_block = p.prefill_block;
        raw.select_left_token = p.select_left_token as u32;
        RawParams::Eviction(raw)
    }

    fn window(p: &WindowParams) -> RawParams {
        let mut raw = unsafe { sys::kvc_window_policy_params_default() };
        raw.budget = p.budget;
        raw.window = p.window;
        raw.pool_kernel = p.pool_kernel;
        raw.hit_k = p.hit_k;
        raw.hit_threshold = p.hit_threshold;
        raw.pyramid_beta = p.pyramid_beta;
        raw.layer_budgets = p.layer_budgets.as_ref().map_or(ptr::null(), |t| t.as_ptr());
        raw.num_layer_budgets = p.layer_budgets.as_ref().map_or(0, |t| t.len() as u32);
        raw.decode_slots = p.decode_slots;
        RawParams::Window(raw)
    }

    fn freqkv(p: &FreqKvParams) -> RawParams {
        let mut raw = unsafe { sys::kvc_freqkv_params_default() };
        raw.sink_tokens = p.sink_tokens;
        raw.retain_ratio = p.retain_ratio;
        raw.recent_tokens = p.recent_tokens;
        RawParams::FreqKv(raw)
    }

    fn params_ptr(&self) -> *const c_void {
        match &self.params {
            RawParams::None => ptr::null(),
            RawParams::Eviction(p) => p as *const _ as *const c_void,
            RawParams::Window(p) => p as *const _ as *const c_void,
            RawParams::FreqKv(p) => p as *const _ as *const c_void,
            RawParams::FaedKv(p) => p as *const _ as *const c_void,
            RawParams::Fourier(p) => p as *const _ as *const c_void,
        }
    }
}

/// What [`Context::cache`] makes: `kvc_cache_desc`'s fields.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheDesc {
    pub layers: u32,
    pub q_heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    /// Slots per layer the cache may hold at once.
    pub capacity: u32,
    pub dtype: DType,
    pub policy: Policy,
    pub rope: Rope,
    pub rope_theta: f32,
    /// Leading dims rotated; 0 means head_dim.
    pub rope_dims: u32,
}

impl Default for CacheDesc {
    fn default() -> Self {
        CacheDesc { layers: 0, q_heads: 0, kv_heads: 0, head_dim: 0, capacity: 0, dtype: DType::F32,
                    policy: Policy::Full, rope: Rope::None, rope_theta: 10000.0, rope_dims: 0 }
    }
}

/// How to make a context (`kvc_context_desc`); `Default` is AUTO, the device chosen by type, no
/// validation, cooperative matrices where the device has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextOptions {
    pub backend: Backend,
    /// The Vulkan device's index, -1 to choose.
    pub device_index: i32,
    /// The Khronos validation layer (`KVC_CONTEXT_VALIDATION`).
    pub validation: bool,
    /// false keeps the Vulkan kernels on SIMT (`KVC_CONTEXT_NO_COOPERATIVE_MATRIX`).
    pub cooperative_matrix: bool,
}

impl Default for ContextOptions {
    fn default() -> Self {
        ContextOptions { backend: Backend::Auto, device_index: -1, validation: false, cooperative_matrix: true }
    }
}

/// `kvc_context_info`: the context's device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextInfo {
    pub backend: Backend,
    pub device_name: String,
    pub vendor_id: u32,
    pub validation_messages: u32,
    pub buffer_offset_alignment: u32,
    /// Whether causal prefill attention runs on cooperative matrices (`KVC_MATRIX_PATH_COOPERATIVE`).
    pub cooperative_matrix: bool,
    /// The matrix shape taken, or why SIMT.
    pub matrix_path_detail: String,
    /// Memory kept between calls for the kernels' work and for reuse; `Context::trim` gives it back.
    pub work_bytes_held: u64,
}

/// `kvc_cache_stats`: counters and memory of a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    pub tokens_seen: u64,
    pub slots_held: u64,
    pub device_bytes_held: u64,
    pub bytes_per_slot: u64,
    pub compressions: u64,
}

/// One layer as [`Cache::read`] returns it: k and v as `[kv_heads][slots][head_dim]`, positions
/// as `[kv_heads][slots]`.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerContents<T> {
    pub slots: u32,
    pub k: Vec<T>,
    pub v: Vec<T>,
    pub positions: Vec<i32>,
}

// ---------------------------------------------------------------- context

/// `kvc_context`: a device (Vulkan or the CPU reference) and the caches and buffers made on it,
/// which borrow it. `Send`, not `Sync` (kvc.h's threading rule).
pub struct Context {
    raw: NonNull<sys::kvc_context>,
    step_open: Cell<bool>,
}

// A context may move to another thread (nothing borrows it then); Cell keeps it !Sync.
unsafe impl Send for Context {}

impl Context {
    /// A context on `backend`, its device chosen by type (discrete first; KVC_DEVICE overrides).
    pub fn new(backend: Backend) -> Result<Context> {
        Context::with_device(backend, -1, false)
    }

    /// A context on the Vulkan device `device_index` (-1 chooses), with the validation layer if
    /// asked.
    pub fn with_device(backend: Backend, device_index: i32, validation: bool) -> Result<Context> {
        Context::with_options(&ContextOptions { backend, device_index, validation, ..ContextOptions::default() })
    }

    /// A context as `options` say (`kvc_context_desc`).
    pub fn with_options(options: &ContextOptions) -> Result<Context> {
        let mut desc = unsafe { sys::kvc_context_desc_default() };
        desc.backend = match options.backend {
            Backend::Auto => sys::KVC_BACKEND_AUTO,
            Backend::Vulkan => sys::KVC_BACKEND_VULKAN,
            Backend::Cpu => sys::KVC_BACKEND_CPU,
        };
        desc.device_index = options.device_index;
        desc.flags = if options.validation { sys::KVC_CONTEXT_VALIDATION } else { 0 }
            | if options.cooperative_matrix { 0 } else { sys::KVC_CONTEXT_NO_COOPERATIVE_MATRIX };
        let mut raw = ptr::null_mut();
        let status = unsafe { sys::kvc_context_create(&desc, &mut raw) };
        if status != sys::KVC_OK {
            return Err(Error::new(Status::from_raw(status), c_string(unsafe { sys::kvc_last_create_error() })));
        }
        Ok(Context { raw: NonNull::new(raw).expect("kvc_context_create returned KVC_OK and NULL"),
                     step_open: Cell::new(false) })
    }

    fn check(&self, status: sys::kvc_status) -> Result<()> {
        if status == sys::KVC_OK {
            Ok(())
        } else {
            Err(Error::new(Status::from_raw(status), self.last_error()))
        }
    }

    fn refuse_in_step(&self, call: &str) -> Result<()> {
        if self.step_open.get() {
            Err(Error::new(Status::BadState,
                format!("{call}: host outputs are refused while a step is open (libkvc would write them when it \
                         finishes); read results from device buffers after the step")))
        } else {
            Ok(())
        }
    }

    /// `kvc_attend_batch_device`: one decode step of `layer` for every cache of `caches` at once,
    /// as `caches[i].attend_device(layer, 1, q[i], out[i], scores)` would, with `scores[i]` when
    /// `scores` is given (None: no scores for that cache). The caches whose attention is the
    /// plain op share one batched kernel.
    pub fn attend_batch_device(&self, caches: &mut [&mut Cache<'_>], layer: u32, q: &[BufferView<'_>], out: &[BufferView<'_>],
                               scores: Option<&[Option<BufferView<'_>>]>) -> Result<()> {
        let count = caches.len();
        if q.len() != count || out.len() != count || scores.is_some_and(|s| s.len() != count) {
            return Err(Error::new(Status::InvalidArgument, format!("{count} caches need as many q, out (and scores) views")));
        }
        let no_view = sys::kvc_buffer_view { buffer: ptr::null_mut(), offset: 0 };
        let handles: Vec<*mut sys::kvc_cache> = caches.iter().map(|cache| cache.raw.as_ptr()).collect();
        let q_views: Vec<sys::kvc_buffer_view> = q.iter().map(|view| view.raw).collect();
        let out_views: Vec<sys::kvc_buffer_view> = out.iter().map(|view| view.raw).collect();
        let score_views: Option<Vec<sys::kvc_buffer_view>> =
            scores.map(|s| s.iter().map(|view| view.map_or(no_view, |v| v.raw)).collect());
        let dtype = caches.first().map_or(DType::F32, |cache| cache.desc.dtype);
        self.check(unsafe {
            sys::kvc_attend_batch_device(self.raw.as_ptr(), count as u32, handles.as_ptr(), layer, raw_dtype(dtype),
                                         q_views.as_ptr(), out_views.as_ptr(),
                                         score_views.as_ref().map_or(ptr::null(), |views| views.as_ptr()))
        })
    }

    /// `kvc_cache_append_batch_device`: a chunk of `n_tokens` appended to `layer` of every cache
    /// of `caches` at once, as `caches[i].append_device(layer, n_tokens, k[i], v[i])` would; the
    /// chunks land in one batched kernel.
    pub fn append_batch_device(&self, caches: &mut [&mut Cache<'_>], layer: u32, n_tokens: u32, k: &[BufferView<'_>],
                               v: &[BufferView<'_>]) -> Result<()> {
        let count = caches.len();
        if k.len() != count || v.len() != count {
            return Err(Error::new(Status::InvalidArgument, format!("{count} caches need as many k and v views")));
        }
        let handles: Vec<*mut sys::kvc_cache> = caches.iter().map(|cache| cache.raw.as_ptr()).collect();
        let k_views: Vec<sys::kvc_buffer_view> = k.iter().map(|view| view.raw).collect();
        let v_views: Vec<sys::kvc_buffer_view> = v.iter().map(|view| view.raw).collect();
        let dtype = caches.first().map_or(DType::F32, |cache| cache.desc.dtype);
        self.check(unsafe {
            sys::kvc_cache_append_batch_device(self.raw.as_ptr(), count as u32, handles.as_ptr(), layer, n_tokens, raw_dtype(dtype),
                                               k_views.as_ptr(), v_views.as_ptr())
        })
    }

    /// `kvc_context_last_error`: the detail of the last failed call on this context.
    pub fn last_error(&self) -> String {
        c_string(unsafe { sys::kvc_context_last_error(self.raw.as_ptr()) })
    }

    /// `kvc_context_info_get`.
    pub fn info(&self) -> Result<ContextInfo> {
        let mut info: sys::kvc_context_info = unsafe { std::mem::zeroed() };
        info.struct_size = std::mem::size_of::<sys::kvc_context_info>() as u32;
        self.check(unsafe { sys::kvc_context_info_get(self.raw.as_ptr(), &mut info) })?;
        Ok(ContextInfo {
            backend: if info.backend == sys::KVC_BACKEND_VULKAN { Backend::Vulkan } else { Backend::Cpu },
            device_name: c_string(info.device_name.as_ptr()),
            vendor_id: info.vendor_id,
            validation_messages: info.validation_messages,
            buffer_offset_alignment: info.buffer_offset_alignment,
            cooperative_matrix: info.matrix_path == sys::KVC_MATRIX_PATH_COOPERATIVE,
            matrix_path_detail: c_string(info.matrix_path_detail.as_ptr()),
            work_bytes_held: info.work_bytes_held,
        })
    }

    /// `kvc_context_trim`: frees the work memory no cache holds (scratch, FFT plans, device
    /// memory kept for reuse).
    pub fn trim(&self) -> Result<()> {
        self.check(unsafe { sys::kvc_context_trim(self.raw.as_ptr()) })
    }

    /// `kvc_cache_create`: an empty cache with storage for `desc.capacity` slots per layer.
    pub fn cache(&self, desc: &CacheDesc) -> Result<Cache<'_>> {
        let policy = RawPolicy::new(&desc.policy);
        let mut raw_desc = unsafe { sys::kvc_cache_desc_default() };
        raw_desc.num_layers = desc.layers;
        raw_desc.num_q_heads = desc.q_heads;
        raw_desc.num_kv_heads = desc.kv_heads;
        raw_desc.head_dim = desc.head_dim;
        raw_desc.dtype = raw_dtype(desc.dtype);
        raw_desc.capacity = desc.capacity;
        raw_desc.policy = policy.policy;
        raw_desc.rope_style = match desc.rope {
            Rope::None => sys::KVC_ROPE_NONE,
            Rope::Neox => sys::KVC_ROPE_NEOX,
            Rope::Interleaved => sys::KVC_ROPE_INTERLEAVED,
        };
        raw_desc.rope_theta = desc.rope_theta;
        raw_desc.rope_dims = desc.rope_dims;
        raw_desc.policy_params = policy.params_ptr();
        let mut raw = ptr::null_mut();
        self.check(unsafe { sys::kvc_cache_create(self.raw.as_ptr(), &raw_desc, &mut raw) })?;
        Ok(Cache { raw: NonNull::new(raw).unwrap(), context: self, desc: desc.clone() })
    }

    /// `kvc_buffer_create`: `bytes` of device memory (host memory on the CPU backend).
    pub fn buffer(&self, bytes: u64) -> Result<Buffer<'_>> {
        let mut raw = ptr::null_mut();
        self.check(unsafe { sys::kvc_buffer_create(self.raw.as_ptr(), bytes, &mut raw) })?;
        Ok(Buffer { raw: NonNull::new(raw).unwrap(), context: self })
    }

    /// `kvc_step_begin`: the calls made on this context's caches and buffers until the
    /// returned [`Step`] ends are recorded into one submission.
    pub fn step(&self) -> Result<Step<'_>> {
        self.check(unsafe { sys::kvc_step_begin(self.raw.as_ptr()) })?;
        self.step_open.set(true);
        Ok(Step { context: self, ended: false })
    }

    /// The raw handle, for kvc-sys calls this crate does not wrap.
    pub fn as_raw(&self) -> *mut sys::kvc_context {
        self.raw.as_ptr()
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        unsafe { sys::kvc_context_destroy(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context").field("info", &self.info().ok()).finish()
    }
}

// ---------------------------------------------------------------- buffers

/// `kvc_buffer`: memory on the context's device for Q, K, V, outputs and scores.
pub struct Buffer<'c> {
    raw: NonNull<sys::kvc_buffer>,
    context: &'c Context,
}

/// `kvc_buffer_view`: a tensor `offset` bytes into a buffer (a multiple of
/// [`ContextInfo::buffer_offset_alignment`]).
#[derive(Clone, Copy)]
pub struct BufferView<'b> {
    raw: sys::kvc_buffer_view,
    buffer: PhantomData<&'b ()>,
}

impl<'c> Buffer<'c> {
    /// Bytes the buffer spans.
    pub fn size(&self) -> Result<u64> {
        let mut bytes = 0;
        self.context.check(unsafe { sys::kvc_buffer_size(self.raw.as_ptr(), &mut bytes) })?;
        Ok(bytes)
    }

    pub fn view(&self, offset: u64) -> BufferView<'_> {
        BufferView { raw: sys::kvc_buffer_view { buffer: self.raw.as_ptr(), offset }, buffer: PhantomData }
    }

    /// `kvc_buffer_write`: copies `data` into the buffer at byte `offset`.
    pub fn write<T: Element>(&self, offset: u64, data: &[T]) -> Result<()> {
        self.context.check(unsafe {
            sys::kvc_buffer_write(self.raw.as_ptr(), offset, std::mem::size_of_val(data) as u64, data.as_ptr().cast())
        })
    }

    /// `kvc_buffer_read`: copies the buffer at byte `offset` into `out`.
    pub fn read<T: Element>(&self, offset: u64, out: &mut [T]) -> Result<()> {
        self.context.refuse_in_step("kvc_buffer_read")?;
        self.context.check(unsafe {
            sys::kvc_buffer_read(self.raw.as_ptr(), offset, std::mem::size_of_val(out) as u64, out.as_mut_ptr().cast())
        })
    }
}

impl Drop for Buffer<'_> {
    fn drop(&mut self) {
        unsafe { sys::kvc_buffer_destroy(self.raw.as_ptr()) }
    }
}

// ---------------------------------------------------------------- cache

/// `kvc_cache`: the KV cache of one sequence. K and V are `[n][kv_heads][head_dim]`, Q and the
/// output `[n][q_heads][head_dim]`, in the cache's dtype.
pub struct Cache<'c> {
    raw: NonNull<sys::kvc_cache>,
    context: &'c Context,
    desc: CacheDesc,
}

impl<'c> Cache<'c> {
    pub fn desc(&self) -> &CacheDesc {
        &self.desc
    }

    /// Tokens in `data` of `heads` heads, checking the dtype and that it is whole tokens.
    fn tokens<T: Element>(&self, data: &[T], heads: u32, what: &str) -> Result<u32> {
        if T::DTYPE != self.desc.dtype {
            return Err(Error::new(Status::DtypeMismatch,
                format!("{what} is {:?}, the cache stores {:?}", T::DTYPE, self.desc.dtype)));
        }
        let per_token = (heads * self.desc.head_dim) as usize;
        if data.is_empty() || data.len() % per_token != 0 {
            return Err(Error::new(Status::InvalidArgument,
                format!("{what} holds {} values: not a whole number (>= 1) of tokens of {heads} x {}",
                        data.len(), self.desc.head_dim)));
        }
        Ok((data.len() / per_token) as u32)
    }

    fn append_raw<T: Element>(&mut self, layer: u32, k: &[T], v: &[T]) -> Result<()> {
        let n = self.tokens(k, self.desc.kv_heads, "k")?;
        if self.tokens(v, self.desc.kv_heads, "v")? != n {
            return Err(Error::new(Status::InvalidArgument, "k and v hold different numbers of tokens"));
        }
        self.context.check(unsafe {
            sys::kvc_cache_append(self.raw.as_ptr(), layer, n, raw_dtype(T::DTYPE), k.as_ptr().cast(), v.as_ptr().cast())
        })
    }

    /// Safety: only outside a step, where the call's work finishes before it returns.
    unsafe fn attend_raw<T: Element>(&mut self, layer: u32, q: &[T], out: &mut [T], scores: Option<&mut [f32]>)
        -> Result<()> {
        let n = self.tokens(q, self.desc.q_heads, "q")?;
        if out.len() != q.len() {
            return Err(Error::new(Status::BufferTooSmall, format!("out holds {} values, q {}", out.len(), q.len())));
        }
        let scores_ptr = match scores {
            Some(scores) => {
                let needed = (self.desc.kv_heads * self.layer_slots(layer)?) as usize;
                if scores.len() < needed {
                    return Err(Error::new(Status::BufferTooSmall,
                        format!("scores holds {} values; kv_heads x slots is {needed}", scores.len())));
                }
                scores.as_mut_ptr()
            }
            None => ptr::null_mut(),
        };
        self.context.check(sys::kvc_attend(self.raw.as_ptr(), layer, n, raw_dtype(T::DTYPE), q.as_ptr().cast(),
                                           out.as_mut_ptr().cast(), scores_ptr))
    }

    /// `kvc_cache_append`: the tokens of `k` and `v` (a prefill chunk, or one decode token) to `layer`.
    pub fn append<T: Element>(&mut self, layer: u32, k: &[T], v: &[T]) -> Result<()> {
        self.append_raw(layer, k, v)
    }

    /// `kvc_attend`: causal attention of the last `q.len() / (q_heads * head_dim)` appended
    /// tokens of `layer` over the cache, into `out` (as long as `q`).
    pub fn attend<T: Element>(&mut self, layer: u32, q: &[T], out: &mut [T]) -> Result<()> {
        self.context.refuse_in_step("kvc_attend")?;
        unsafe { self.attend_raw(layer, q, out, None) }
    }

    /// [`Cache::attend`], also writing the attention probability per kv head and slot
    /// (`[kv_heads][slots]`, slots as [`Cache::layer_slots`] says after the append) to `scores`.
    pub fn attend_with_scores<T: Element>(&mut self, layer: u32, q: &[T], out: &mut [T], scores: &mut [f32])
        -> Result<()> {
        self.context.refuse_in_step("kvc_attend")?;
        unsafe { self.attend_raw(layer, q, out, Some(scores)) }
    }

    /// `kvc_cache_layer_slots`: slots `layer` holds now.
    pub fn layer_slots(&self, layer: u32) -> Result<u32> {
        let mut slots = 0;
        self.context.check(unsafe { sys::kvc_cache_layer_slots(self.raw.as_ptr(), layer, &mut slots) })?;
        Ok(slots)
    }

    /// `kvc_cache_read`: `layer` as attention sees it (keys before RoPE).
    pub fn read<T: Element>(&mut self, layer: u32) -> Result<LayerContents<T>> {
        let slots = self.layer_slots(layer)?;
        let count = (self.desc.kv_heads * slots * self.desc.head_dim) as usize;
        let mut contents = LayerContents { slots, k: vec![T::default(); count], v: vec![T::default(); count],
                                           positions: vec![0; (self.desc.kv_heads * slots) as usize] };
        self.context.check(unsafe {
            sys::kvc_cache_read(self.raw.as_ptr(), layer, slots, raw_dtype(T::DTYPE), contents.k.as_mut_ptr().cast(),
                                contents.v.as_mut_ptr().cast(), contents.positions.as_mut_ptr())
        })?;
        Ok(contents)
    }

    /// `kvc_faedkv_ablate` (FAEDKV's eq. 6, for the ablation of eq. 7): `layer`'s k and v as
    /// [`Cache::read`] lays them out, with the middle segment rebuilt without chunk `pruned_chunk`
    /// of `params.chunks` (and its mirror bins). The cache must hold the layer's tokens whole.
    pub fn faedkv_ablate<T: Element>(&mut self, layer: u32, pruned_chunk: u32, params: &FaedKvParams)
        -> Result<(Vec<T>, Vec<T>)> {
        let slots = self.layer_slots(layer)?;
        let count = (self.desc.kv_heads * slots * self.desc.head_dim) as usize;
        let (mut k, mut v) = (vec![T::default(); count], vec![T::default(); count]);
        let raw = params.to_raw();
        self.context.check(unsafe {
            sys::kvc_faedkv_ablate(self.raw.as_ptr(), layer, &raw, pruned_chunk, slots, raw_dtype(T::DTYPE),
                                   k.as_mut_ptr().cast(), v.as_mut_ptr().cast())
        })?;
        Ok((k, v))
    }

    /// `kvc_cache_stats_get`.
    pub fn stats(&self) -> Result<CacheStats> {
        let mut s = sys::kvc_cache_stats { struct_size: std::mem::size_of::<sys::kvc_cache_stats>() as u32,
                                           ..Default::default() };
        self.context.check(unsafe { sys::kvc_cache_stats_get(self.raw.as_ptr(), &mut s) })?;
        Ok(CacheStats { tokens_seen: s.tokens_seen, slots_held: s.slots_held, device_bytes_held: s.device_bytes_held,
                        bytes_per_slot: s.bytes_per_slot, compressions: s.compressions })
    }

    /// `kvc_cache_end_prefill`: the prompt ended; the observation-window policies select now.
    pub fn end_prefill(&mut self) -> Result<()> {
        self.context.check(unsafe { sys::kvc_cache_end_prefill(self.raw.as_ptr()) })
    }

    /// `kvc_cache_reset`: forgets every token; storage stays allocated.
    pub fn reset(&mut self) -> Result<()> {
        self.context.check(unsafe { sys::kvc_cache_reset(self.raw.as_ptr()) })
    }

    /// `kvc_cache_append_device`: `n_tokens` of K and V already in device buffers.
    pub fn append_device(&mut self, layer: u32, n_tokens: u32, k: BufferView<'_>, v: BufferView<'_>) -> Result<()> {
        self.context.check(unsafe {
            sys::kvc_cache_append_device(self.raw.as_ptr(), layer, n_tokens, raw_dtype(self.desc.dtype), k.raw, v.raw)
        })
    }

    /// `kvc_attend_device`: Q, the output and optionally the scores in device buffers.
    pub fn attend_device(&mut self, layer: u32, n_queries: u32, q: BufferView<'_>, out: BufferView<'_>,
                         scores: Option<BufferView<'_>>) -> Result<()> {
        let scores = scores.map_or(sys::kvc_buffer_view { buffer: ptr::null_mut(), offset: 0 }, |s| s.raw);
        self.context.check(unsafe {
            sys::kvc_attend_device(self.raw.as_ptr(), layer, n_queries, raw_dtype(self.desc.dtype), q.raw, out.raw,
                                   scores)
        })
    }

    /// `kvc_decode_device`: one decode token's K and V appended and its query attended in one
    /// call, as [`Cache::append_device`] of 1 token then [`Cache::attend_device`] without scores;
    /// FULL, FreqKV and the window policies write the token inside the attention's own work on
    /// Vulkan.
    pub fn decode_device(&mut self, layer: u32, k: BufferView<'_>, v: BufferView<'_>, q: BufferView<'_>, out: BufferView<'_>)
                         -> Result<()> {
        self.context.check(unsafe {
            sys::kvc_decode_device(self.raw.as_ptr(), layer, raw_dtype(self.desc.dtype), k.raw, v.raw, q.raw, out.raw)
        })
    }
}

impl Drop for Cache<'_> {
    fn drop(&mut self) {
        unsafe { sys::kvc_cache_destroy(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Cache<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache").field("desc", &self.desc).finish()
    }
}

// ---------------------------------------------------------------- steps

/// An open step (`kvc_step_begin`): the calls made on the context's caches and buffers until
/// it ends are recorded into one submission. Host inputs are read during each call; host
/// outputs ([`Cache::attend`], [`Buffer::read`]) are refused while a step is open, since libkvc
/// would write them when the step finishes: read results from device buffers after it.
/// Dropping an unfinished step ends it and waits for it.
pub struct Step<'c> {
    context: &'c Context,
    ended: bool,
}

impl Step<'_> {
    /// `kvc_step_end`: submits the step without waiting.
    pub fn end(&mut self) -> Result<()> {
        if self.ended {
            return Err(Error::new(Status::BadState, "the step was ended already"));
        }
        self.ended = true;
        self.context.step_open.set(false);
        self.context.check(unsafe { sys::kvc_step_end(self.context.raw.as_ptr()) })
    }

    /// `kvc_step_wait` with a timeout in nanoseconds (0 polls, `u64::MAX` waits as long as it
    /// takes): `Ok(true)` when the step finished, `Ok(false)` while it runs. Ends the step
    /// first if it is still open.
    pub fn wait(&mut self, timeout_ns: u64) -> Result<bool> {
        if !self.ended {
            self.end()?;
        }
        match unsafe { sys::kvc_step_wait(self.context.raw.as_ptr(), timeout_ns) } {
            sys::KVC_TIMEOUT => Ok(false),
            status => self.context.check(status).map(|_| true),
        }
    }

    /// Ends the step and waits for it.
    pub fn finish(mut self) -> Result<()> {
        self.wait(u64::MAX).map(|_| ())
    }
}

impl Drop for Step<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.ended = true;
            self.context.step_open.set(false);
            unsafe { sys::kvc_step_end(self.context.raw.as_ptr()) };
        }
        unsafe { sys::kvc_step_wait(self.context.raw.as_ptr(), u64::MAX) };
    }
}
