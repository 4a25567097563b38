//! Raw declarations of libkvc's C API, `include/kvc/kvc.h` 0.2, written from the header in its
//! order (one place to change when kvc.h changes). Use the safe `kvc` crate instead unless you
//! need the C calls themselves; kvc.h documents every function.
#![allow(non_camel_case_types)]
#![no_std]

use core::ffi::{c_char, c_void};

pub const KVC_VERSION_MAJOR: u32 = 0;
pub const KVC_VERSION_MINOR: u32 = 2;
pub const KVC_VERSION_PATCH: u32 = 0;

/// `kvc_status`: 0 is `KVC_OK`; the values are kvc.h's.
pub type kvc_status = i32;
pub const KVC_OK: kvc_status = 0;
pub const KVC_ERROR_INVALID_ARGUMENT: kvc_status = 1;
pub const KVC_ERROR_NULL_POINTER: kvc_status = 2;
pub const KVC_ERROR_OUT_OF_RANGE: kvc_status = 3;
pub const KVC_ERROR_DTYPE_MISMATCH: kvc_status = 4;
pub const KVC_ERROR_NOT_FINITE: kvc_status = 5;
pub const KVC_ERROR_BAD_STATE: kvc_status = 6;
pub const KVC_ERROR_CAPACITY: kvc_status = 7;
pub const KVC_ERROR_BUFFER_TOO_SMALL: kvc_status = 8;
pub const KVC_ERROR_NO_VULKAN_LOADER: kvc_status = 9;
pub const KVC_ERROR_NO_DEVICE: kvc_status = 10;
pub const KVC_ERROR_VULKAN: kvc_status = 11;
pub const KVC_ERROR_OUT_OF_MEMORY: kvc_status = 12;
pub const KVC_ERROR_UNSUPPORTED: kvc_status = 13;
pub const KVC_ERROR_INTERNAL: kvc_status = 14;
pub const KVC_TIMEOUT: kvc_status = 15;
pub const KVC_ERROR_DEVICE_LOST: kvc_status = 16;

pub type kvc_backend = i32;
pub const KVC_BACKEND_AUTO: kvc_backend = 0;
pub const KVC_BACKEND_VULKAN: kvc_backend = 1;
pub const KVC_BACKEND_CPU: kvc_backend = 2;

pub type kvc_dtype = i32;
pub const KVC_DTYPE_F32: kvc_dtype = 0;
pub const KVC_DTYPE_F16: kvc_dtype = 1;

pub type kvc_policy = i32;
pub const KVC_POLICY_FULL: kvc_policy = 0;
pub const KVC_POLICY_STREAMING: kvc_policy = 1;
pub const KVC_POLICY_H2O: kvc_policy = 2;
pub const KVC_POLICY_TOVA: kvc_policy = 3;
pub const KVC_POLICY_TREEKV: kvc_policy = 4;
pub const KVC_POLICY_SNAPKV: kvc_policy = 5;
pub const KVC_POLICY_PYRAMIDKV: kvc_policy = 6;
pub const KVC_POLICY_HITKV: kvc_policy = 7;
pub const KVC_POLICY_PHITKV: kvc_policy = 8;
pub const KVC_POLICY_FREQKV: kvc_policy = 9;
pub const KVC_POLICY_FAEDKV: kvc_policy = 10;
pub const KVC_POLICY_FOURIER: kvc_policy = 11;

pub type kvc_rope_style = i32;
pub const KVC_ROPE_NONE: kvc_rope_style = 0;
pub const KVC_ROPE_NEOX: kvc_rope_style = 1;
pub const KVC_ROPE_INTERLEAVED: kvc_rope_style = 2;

pub const KVC_CONTEXT_VALIDATION: u32 = 0x1;
pub const KVC_CONTEXT_NO_COOPERATIVE_MATRIX: u32 = 0x2;

pub type kvc_matrix_path = i32;
pub const KVC_MATRIX_PATH_SIMT: kvc_matrix_path = 0;
pub const KVC_MATRIX_PATH_COOPERATIVE: kvc_matrix_path = 1;
pub const KVC_RECENT_WINDOW_DEFAULT: u32 = 0xFFFF_FFFF;
pub const KVC_DECODE_SLOTS_DEFAULT: u32 = 0;

#[repr(C)]
pub struct kvc_context {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct kvc_cache {
    _opaque: [u8; 0],
}
#[repr(C)]
pub struct kvc_buffer {
    _opaque: [u8; 0],
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvc_context_desc {
    pub struct_size: u32,
    pub backend: kvc_backend,
    pub device_index: i32,
    pub flags: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvc_vulkan_handles {
    pub struct_size: u32,
    pub instance: *mut c_void,
    pub physical_device: *mut c_void,
    pub device: *mut c_void,
    pub queue: *mut c_void,
    pub queue_family_index: u32,
    pub get_instance_proc_addr: *mut c_void,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvc_context_info {
    pub struct_size: u32,
    pub backend: kvc_backend,
    pub device_name: [c_char; 256],
    pub vendor_id: u32,
    pub validation_messages: u32,
    pub buffer_offset_alignment: u32,
    pub matrix_path: kvc_matrix_path,
    pub matrix_path_detail: [c_char; 160],
    pub work_bytes_held: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvc_cache_desc {
    pub struct_size: u32,
    pub num_layers: u32,
    pub num_q_heads: u32,
    pub num_kv_heads: u32,
    pub head_dim: u32,
    pub dtype: kvc_dtype,
    pub capacity: u32,
    pub policy: kvc_policy,
    pub rope_style: kvc_rope_style,
    pub rope_theta: f32,
    pub rope_dims: u32,
    pub policy_params: *const c_void,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvc_eviction_params {
    pub struct_size: u32,
    pub sinks: u32,
    pub recent_window: u32,
    pub chunk_slots: u32,
    pub layer_capacities: *const u32,
    pub prefill_block: u32,
    pub select_left_token: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvc_freqkv_params {
    pub struct_size: u32,
    pub sink_tokens: u32,
    pub retain_ratio: f32,
    pub recent_tokens: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvc_faedkv_params {
    pub struct_size: u32,
    pub sinks: u32,
    pub recent_window: u32,
    pub chunks: u32,
    pub retain_ratio: f32,
    pub chunk_importance: *const f32,
    pub chunk_keep: *const u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvc_fourier_params {
    pub struct_size: u32,
    pub sinks: u32,
    pub local_window: u32,
    pub num_states: u32,
    pub window_length: u32,
    pub key_ratios: *const f32,
    pub value_ratios: *const f32,
    pub key_dims: *const u8,
    pub value_dims: *const u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kvc_cache_stats {
    pub struct_size: u32,
    pub tokens_seen: u64,
    pub slots_held: u64,
    pub device_bytes_held: u64,
    pub bytes_per_slot: u64,
    pub compressions: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvc_window_policy_params {
    pub struct_size: u32,
    pub budget: u32,
    pub window: u32,
    pub pool_kernel: u32,
    pub hit_k: u32,
    pub hit_threshold: f32,
    pub pyramid_beta: f32,
    pub layer_budgets: *const u32,
    pub num_layer_budgets: u32,
    pub decode_slots: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvc_buffer_view {
    pub buffer: *mut kvc_buffer,
    pub offset: u64,
}

extern "C" {
    pub fn kvc_version_number() -> u32;
    pub fn kvc_version_string() -> *const c_char;
    pub fn kvc_status_name(status: kvc_status) -> *const c_char;

    pub fn kvc_context_desc_default() -> kvc_context_desc;
    pub fn kvc_context_create(desc: *const kvc_context_desc, out_context: *mut *mut kvc_context) -> kvc_status;
    pub fn kvc_context_create_from_vulkan(handles: *const kvc_vulkan_handles, out_context: *mut *mut kvc_context)
        -> kvc_status;
    pub fn kvc_context_destroy(context: *mut kvc_context);
    pub fn kvc_context_last_error(context: *const kvc_context) -> *const c_char;
    pub fn kvc_last_create_error() -> *const c_char;
    pub fn kvc_context_info_get(context: *mut kvc_context, info: *mut kvc_context_info) -> kvc_status;
    pub fn kvc_context_trim(context: *mut kvc_context) -> kvc_status;

    pub fn kvc_eviction_params_default() -> kvc_eviction_params;
    pub fn kvc_freqkv_params_default() -> kvc_freqkv_params;
    pub fn kvc_faedkv_params_default() -> kvc_faedkv_params;
    pub fn kvc_fourier_params_default() -> kvc_fourier_params;
    pub fn kvc_cache_desc_default() -> kvc_cache_desc;
    pub fn kvc_cache_create(context: *mut kvc_context, desc: *const kvc_cache_desc, out_cache: *mut *mut kvc_cache)
        -> kvc_status;
    pub fn kvc_cache_destroy(cache: *mut kvc_cache);
    pub fn kvc_cache_append(cache: *mut kvc_cache, layer: u32, n_tokens: u32, dtype: kvc_dtype, k: *const c_void,
                            v: *const c_void) -> kvc_status;
    pub fn kvc_attend(cache: *mut kvc_cache, layer: u32, n_queries: u32, dtype: kvc_dtype, q: *const c_void,
                      out: *mut c_void, scores: *mut f32) -> kvc_status;
    pub fn kvc_cache_layer_slots(cache: *const kvc_cache, layer: u32, out_slots: *mut u32) -> kvc_status;
    pub fn kvc_cache_read(cache: *mut kvc_cache, layer: u32, max_slots: u32, dtype: kvc_dtype, k: *mut c_void,
                          v: *mut c_void, positions: *mut i32) -> kvc_status;
    pub fn kvc_cache_stats_get(cache: *const kvc_cache, stats: *mut kvc_cache_stats) -> kvc_status;
    pub fn kvc_faedkv_ablate(cache: *mut kvc_cache, layer: u32, params: *const kvc_faedkv_params, pruned_chunk: u32,
                             max_slots: u32, dtype: kvc_dtype, k: *mut c_void, v: *mut c_void) -> kvc_status;

    pub fn kvc_window_policy_params_default() -> kvc_window_policy_params;
    pub fn kvc_cache_end_prefill(cache: *mut kvc_cache) -> kvc_status;
    pub fn kvc_cache_reset(cache: *mut kvc_cache) -> kvc_status;

    pub fn kvc_buffer_create(context: *mut kvc_context, bytes: u64, out_buffer: *mut *mut kvc_buffer) -> kvc_status;
    pub fn kvc_buffer_wrap_vulkan(context: *mut kvc_context, vk_buffer: *mut c_void, offset: u64, bytes: u64,
                                  out_buffer: *mut *mut kvc_buffer) -> kvc_status;
    pub fn kvc_buffer_destroy(buffer: *mut kvc_buffer);
    pub fn kvc_buffer_size(buffer: *const kvc_buffer, out_bytes: *mut u64) -> kvc_status;
    pub fn kvc_buffer_write(buffer: *mut kvc_buffer, offset: u64, bytes: u64, src: *const c_void) -> kvc_status;
    pub fn kvc_buffer_read(buffer: *mut kvc_buffer, offset: u64, bytes: u64, dst: *mut c_void) -> kvc_status;
    pub fn kvc_cache_append_device(cache: *mut kvc_cache, layer: u32, n_tokens: u32, dtype: kvc_dtype,
                                   k: kvc_buffer_view, v: kvc_buffer_view) -> kvc_status;
    pub fn kvc_attend_device(cache: *mut kvc_cache, layer: u32, n_queries: u32, dtype: kvc_dtype, q: kvc_buffer_view,
                             out: kvc_buffer_view, scores: kvc_buffer_view) -> kvc_status;
    pub fn kvc_decode_device(cache: *mut kvc_cache, layer: u32, dtype: kvc_dtype, k: kvc_buffer_view, v: kvc_buffer_view,
                             q: kvc_buffer_view, out: kvc_buffer_view) -> kvc_status;
    pub fn kvc_attend_batch_device(context: *mut kvc_context, n_caches: u32, caches: *const *mut kvc_cache, layer: u32,
                                   dtype: kvc_dtype, q: *const kvc_buffer_view, out: *const kvc_buffer_view,
                                   scores: *const kvc_buffer_view) -> kvc_status;
    pub fn kvc_cache_append_batch_device(context: *mut kvc_context, n_caches: u32, caches: *const *mut kvc_cache, layer: u32,
                                         n_tokens: u32, dtype: kvc_dtype, k: *const kvc_buffer_view,
                                         v: *const kvc_buffer_view) -> kvc_status;

    pub fn kvc_step_begin(context: *mut kvc_context) -> kvc_status;
    pub fn kvc_step_begin_commands(context: *mut kvc_context, command_buffer: *mut c_void) -> kvc_status;
    pub fn kvc_step_end(context: *mut kvc_context) -> kvc_status;
    pub fn kvc_step_wait(context: *mut kvc_context, timeout_ns: u64) -> kvc_status;
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    /// The *_default() functions set struct_size to the C sizeof: these mirrors must agree.
    #[test]
    fn structs_match_kvc_h() {
        use core::mem::size_of;
        unsafe {
            assert_eq!(kvc_context_desc_default().struct_size as usize, size_of::<kvc_context_desc>());
            assert_eq!(kvc_cache_desc_default().struct_size as usize, size_of::<kvc_cache_desc>());
            assert_eq!(kvc_eviction_params_default().struct_size as usize, size_of::<kvc_eviction_params>());
            assert_eq!(kvc_freqkv_params_default().struct_size as usize, size_of::<kvc_freqkv_params>());
            assert_eq!(kvc_faedkv_params_default().struct_size as usize, size_of::<kvc_faedkv_params>());
            assert_eq!(kvc_fourier_params_default().struct_size as usize, size_of::<kvc_fourier_params>());
            assert_eq!(kvc_window_policy_params_default().struct_size as usize, size_of::<kvc_window_policy_params>());
            // kvc_context_info has no *_default(): kvc.h's layout is 4 + 4 + 256 + 4 * 4 + 160 = 440
            // bytes, then the u64 work_bytes_held.
            assert_eq!(size_of::<kvc_context_info>(), 448);
            assert_eq!(kvc_version_number(), KVC_VERSION_MAJOR * 10000 + KVC_VERSION_MINOR * 100 + KVC_VERSION_PATCH);
        }
    }
}
