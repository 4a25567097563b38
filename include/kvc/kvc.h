/*
 * libkvc: a compressed key/value cache for LLM inference, with attention computed over it,
 * on any Vulkan device (NVIDIA, AMD, Intel, Mesa's lavapipe) or on the CPU.
 *
 * Conventions used by every function below:
 *  - Every call returns a kvc_status. KVC_OK is 0; kvc_status_name() names any status and
 *    kvc_context_last_error() holds the detail of the last failure on that context.
 *  - A call that fails leaves every handle exactly as it was, also when it fails on the device
 *    (out of memory, a Vulkan error) part way: on Vulkan each call (or step) saves what it
 *    changes and puts it back unless its work is submitted. The exception is a lost device
 *    (KVC_ERROR_DEVICE_LOST): from then on the context and its caches and buffers refuse every
 *    call with that status, except the destroy functions and kvc_context_last_error.
 *  - Descriptors start with `struct_size`: set it to sizeof(the struct) so the ABI can grow.
 *  - Tensors are dense, row-major arrays:
 *      K, V:  [n_tokens][num_kv_heads][head_dim]
 *      Q, O:  [n_tokens][num_q_heads][head_dim]
 *    in the cache's dtype (f32 as float, f16 as IEEE binary16 in uint16_t), either host arrays
 *    (the convenient path: libkvc stages them) or places in a kvc_buffer on the device (the
 *    engine path: no host round trip; see "device buffers" and "steps" below).
 *  - Threads: contexts may be created and destroyed on any thread, and calls on different
 *    contexts (their caches, buffers and steps) may run on different threads at the same time:
 *    contexts share no state. A context and everything made from it must be used by one
 *    thread at a time: libkvc takes no lock on a context, and its caches share the context's
 *    command buffer, staging memory and last-error message, so even two caches of one context
 *    must not be called at once. To move a context between threads, order the calls with the
 *    application's own synchronization (a mutex, a join). kvc_last_create_error is per thread;
 *    kvc_status_name, the version queries and the *_default functions may be called from any
 *    thread at any time. kvc_context_create_from_vulkan with its own get_instance_proc_addr
 *    points the process-wide Vulkan entry points libkvc calls through at that loader: make
 *    such a context before other threads use Vulkan contexts. Each Vulkan context may run one
 *    thread of its own, which frees device memory the context no longer uses (through that
 *    device's own vkDestroyBuffer and vkFreeMemory, never the process-wide entry points).
 */
#ifndef KVC_KVC_H
#define KVC_KVC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(KVC_BUILDING_SHARED)
#define KVC_API __declspec(dllexport)
#elif defined(__GNUC__)
#define KVC_API __attribute__((visibility("default")))
#else
#define KVC_API
#endif

#define KVC_VERSION_MAJOR 0
#define KVC_VERSION_MINOR 2
#define KVC_VERSION_PATCH 0
#define KVC_VERSION_NUMBER (KVC_VERSION_MAJOR * 10000 + KVC_VERSION_MINOR * 100 + KVC_VERSION_PATCH)

/* The version of the library linked at run time, as MAJOR*10000 + MINOR*100 + PATCH. */
KVC_API uint32_t kvc_version_number(void);
/* The same version as "MAJOR.MINOR.PATCH". */
KVC_API const char* kvc_version_string(void);

/* ---------------------------------------------------------------- status codes */

typedef enum kvc_status {
    KVC_OK = 0,
    KVC_ERROR_INVALID_ARGUMENT = 1, /* a value out of its documented range */
    KVC_ERROR_NULL_POINTER = 2,     /* a required pointer or handle is NULL */
    KVC_ERROR_OUT_OF_RANGE = 3,     /* an index (layer, device) past its bound */
    KVC_ERROR_DTYPE_MISMATCH = 4,   /* data passed in a dtype the cache does not store */
    KVC_ERROR_NOT_FINITE = 5,       /* input holds NaN or Inf */
    KVC_ERROR_BAD_STATE = 6,        /* calls out of order (attend before any append, ...) */
    KVC_ERROR_CAPACITY = 7,         /* the cache cannot hold what was asked */
    KVC_ERROR_BUFFER_TOO_SMALL = 8, /* a buffer or view is smaller than the data it must hold */
    KVC_ERROR_NO_VULKAN_LOADER = 9, /* libvulkan.so.1 could not be loaded */
    KVC_ERROR_NO_DEVICE = 10,       /* the loader found no usable Vulkan device */
    KVC_ERROR_VULKAN = 11,          /* a Vulkan call failed; the message names it */
    KVC_ERROR_OUT_OF_MEMORY = 12,   /* host or device memory exhausted */
    KVC_ERROR_UNSUPPORTED = 13,     /* valid, but this build or device cannot do it */
    KVC_ERROR_INTERNAL = 14,        /* a bug in libkvc: please report it */
    KVC_TIMEOUT = 15,               /* kvc_step_wait: the step has not finished yet (not an error) */
    KVC_ERROR_DEVICE_LOST = 16,     /* the Vulkan device was lost: the context refuses all work from then on */
    KVC_STATUS_MAX_ENUM = 0x7fffffff /* keeps the enum 32-bit and any value well-defined */
} kvc_status;

/* The status as a constant string, e.g. "KVC_ERROR_NULL_POINTER"; never NULL. */
KVC_API const char* kvc_status_name(kvc_status status);

/* ---------------------------------------------------------------- context */

typedef struct kvc_context kvc_context;
typedef struct kvc_cache kvc_cache;

typedef enum kvc_backend {
    KVC_BACKEND_AUTO = 0,   /* Vulkan if a device exists, else the CPU */
    KVC_BACKEND_VULKAN = 1, /* Vulkan or fail with KVC_ERROR_NO_VULKAN_LOADER / _NO_DEVICE */
    KVC_BACKEND_CPU = 2,    /* the CPU reference implementation */
    KVC_BACKEND_MAX_ENUM = 0x7fffffff
} kvc_backend;

/* Enable the Khronos validation layer; its messages are counted (kvc_context_info). The
 * environment variable KVC_VALIDATION=1 does the same for every context. */
#define KVC_CONTEXT_VALIDATION 0x1u
/* Run the SIMT kernels even where the device has cooperative matrices (kvc_matrix_path). The
 * environment variable KVC_COOPERATIVE_MATRIX=0 does the same for every context. */
#define KVC_CONTEXT_NO_COOPERATIVE_MATRIX 0x2u

typedef struct kvc_context_desc {
    uint32_t struct_size;
    kvc_backend backend;
    /* Vulkan physical device index as the loader enumerates them, or -1 to choose
     * (discrete > integrated > virtual > CPU). The environment variable KVC_DEVICE overrides -1. */
    int32_t device_index;
    uint32_t flags; /* KVC_CONTEXT_* */
} kvc_context_desc;

/* Fills a descriptor with the defaults: AUTO backend, device chosen by type, no flags. */
KVC_API kvc_context_desc kvc_context_desc_default(void);

/* Creates a context. Fails with KVC_ERROR_NO_VULKAN_LOADER or KVC_ERROR_NO_DEVICE when the
 * Vulkan backend was asked for and cannot be had; AUTO falls back to the CPU instead. */
KVC_API kvc_status kvc_context_create(const kvc_context_desc* desc, kvc_context** out_context);

/* An application's own Vulkan objects, for engines that already run Vulkan. libkvc records
 * into its own command pool on `queue` and waits for its own work only; the application
 * must not use `queue` from another thread during a kvc call. Handles are passed as void*
 * so that this header needs no Vulkan headers. */
typedef struct kvc_vulkan_handles {
    uint32_t struct_size;
    void* instance;               /* VkInstance */
    void* physical_device;        /* VkPhysicalDevice */
    void* device;                 /* VkDevice */
    void* queue;                  /* VkQueue with compute support */
    uint32_t queue_family_index;  /* the family of `queue` */
    void* get_instance_proc_addr; /* PFN_vkGetInstanceProcAddr, or NULL for the system loader's */
} kvc_vulkan_handles;

/* Creates a context over an application's Vulkan device. The application keeps ownership:
 * destroy the context before the device. */
KVC_API kvc_status kvc_context_create_from_vulkan(const kvc_vulkan_handles* handles,
                                                  kvc_context** out_context);

/* Destroys a context; its caches must have been destroyed first. NULL is a no-op. */
KVC_API void kvc_context_destroy(kvc_context* context);

/* The detail of the last failed call on this context (or on one of its caches), or "" when
 * none failed. Valid until the next call on the context. */
KVC_API const char* kvc_context_last_error(const kvc_context* context);

/* The detail of the last kvc_context_create* failure on this thread (no context exists yet). */
KVC_API const char* kvc_last_create_error(void);

/* How a context's Vulkan kernels multiply tiles where libkvc has both kernels (today: causal
 * prefill attention over f16 caches, head_dim a multiple of 16 up to 128). */
typedef enum kvc_matrix_path {
    KVC_MATRIX_PATH_SIMT = 0,        /* f32 multiply-adds on every device (and the CPU backend) */
    KVC_MATRIX_PATH_COOPERATIVE = 1, /* f16 x f16 -> f32 cooperative matrices (VK_KHR_cooperative_matrix:
                                        tensor cores); needs a build with glslang >= 13 */
    KVC_MATRIX_PATH_MAX_ENUM = 0x7fffffff
} kvc_matrix_path;

typedef struct kvc_context_info {
    uint32_t struct_size;
    kvc_backend backend;          /* VULKAN or CPU, never AUTO */
    char device_name[256];        /* e.g. "NVIDIA H100 80GB HBM3", "llvmpipe (...)", "CPU" */
    uint32_t vendor_id;           /* PCI vendor id, 0 for the CPU backend */
    uint32_t validation_messages; /* validation-layer warnings and errors seen so far */
    uint32_t buffer_offset_alignment; /* kvc_buffer_view offsets are multiples of this (16 on the CPU) */
    kvc_matrix_path matrix_path;  /* fixed when the context is created */
    char matrix_path_detail[160]; /* the matrix shape taken, or why SIMT ("SIMT: ...") */
    uint64_t work_bytes_held;     /* memory kept between calls for the kernels' work, shared by the
                                   * context's caches: scratch (it grows to the largest call's need:
                                   * a 2048-query prefill over 128K f16 slots with RoPE keeps a rotated
                                   * copy of a layer's keys), shared tables (FreqKV's transforms), and
                                   * FFT plans' and chirp filters' buffers (VkFFT's own work buffers
                                   * not counted); device memory on Vulkan, host memory on the CPU.
                                   * On Vulkan also the device memory of freed caches and tensors that
                                   * the context keeps for reuse (up to a quarter of the device's
                                   * memory; see kvc_context_trim). kvc_context_trim gives back the
                                   * scratch, the plans no cache keeps and that kept memory; the
                                   * shared tables stay */
} kvc_context_info;

/* Describes the context's device. Set info->struct_size before the call. */
KVC_API kvc_status kvc_context_info_get(kvc_context* context, kvc_context_info* info);

/* Frees the context's work memory that no cache holds (scratch, FFT plans; see work_bytes_held),
 * after a long prefill say; later calls allocate again what they need. Waits for the last step
 * first if it is still running. On Vulkan, device memory that libkvc lets go of (a destroyed
 * cache's, a selection's prompt storage, outgrown scratch) is kept for reuse, each context up to
 * a quarter of the device's largest device-local heap: a cache made or reset for the next
 * sequence takes it back instead of allocating (an H100 allocates about 28 ms per GB). Past that
 * budget it is freed on a thread of the context's own, off the caller's path. An allocation of
 * the context's that finds the device full frees what that context keeps and tries again; the
 * application's own allocations, and other contexts', do not: call this first where they need
 * the memory. This call frees all of it and returns once it is back on the device.
 * KVC_BUFFER_REUSE=0 in the environment keeps nothing for reuse. KVC_ERROR_BAD_STATE inside a
 * step. */
KVC_API kvc_status kvc_context_trim(kvc_context* context);

/* ---------------------------------------------------------------- cache */

typedef enum kvc_dtype {
    KVC_DTYPE_F32 = 0,
    KVC_DTYPE_F16 = 1,
    KVC_DTYPE_MAX_ENUM = 0x7fffffff
} kvc_dtype;

typedef enum kvc_policy {
    KVC_POLICY_FULL = 0,      /* keep every token up to `capacity` */
    KVC_POLICY_STREAMING = 1, /* StreamingLLM: sinks + the most recent tokens (kvc_eviction_params) */
    KVC_POLICY_H2O = 2,       /* H2O: evict the lowest accumulated attention, per kv head (kvc_eviction_params) */
    KVC_POLICY_TOVA = 3,      /* TOVA: evict the lowest attention of the current query, per layer (kvc_eviction_params) */
    KVC_POLICY_TREEKV = 4,    /* TreeKV: tree-shaped eviction scope over averaged attention (kvc_eviction_params) */
    KVC_POLICY_SNAPKV = 5,    /* at the end of the prefill keep the window and the prefix tokens it attends to most */
    KVC_POLICY_PYRAMIDKV = 6, /* SNAPKV's selection under per-layer budgets falling from the first layer to the last */
    KVC_POLICY_HITKV = 7,     /* at the end of the prefill keep the prefix tokens often in the window queries' top K */
    KVC_POLICY_PHITKV = 8,    /* HITKV's selection under PYRAMIDKV's per-layer budgets */
    KVC_POLICY_FREQKV = 9,    /* compress the cache in the frequency domain when it fills (kvc_freqkv_params) */
    KVC_POLICY_FAEDKV = 10,   /* the prompt's middle as chosen DFT bins, updated by the IWDFT (kvc_faedkv_params) */
    KVC_POLICY_FOURIER = 11,  /* FourierAttention: the middle's chosen head dims as HiPPO-FourierT coefficients (kvc_fourier_params) */
    KVC_POLICY_MAX_ENUM = 0x7fffffff
} kvc_policy;

typedef enum kvc_rope_style {
    KVC_ROPE_NONE = 0,       /* keys and queries arrive ready to use */
    KVC_ROPE_NEOX = 1,       /* rotate pairs (i, i + rotary_dims/2), as Llama and GPT-NeoX do */
    KVC_ROPE_INTERLEAVED = 2, /* rotate pairs (2i, 2i + 1), as GPT-J does */
    KVC_ROPE_MAX_ENUM = 0x7fffffff
} kvc_rope_style;

typedef struct kvc_cache_desc {
    uint32_t struct_size;
    uint32_t num_layers;
    uint32_t num_q_heads;  /* a multiple of num_kv_heads (grouped-query attention), at most 65535 */
    uint32_t num_kv_heads;
    uint32_t head_dim;     /* 8..256, a multiple of 8 */
    kvc_dtype dtype;       /* storage and I/O dtype; accumulation is always f32 */
    uint32_t capacity;     /* slots per layer the cache may hold at once */
    kvc_policy policy;
    /* RoPE applied inside libkvc: keys and queries arrive before RoPE, and attention rotates
     * each by the position its slot carries. The policies that re-assign positions store keys
     * before RoPE and rotate them as attention reads them; KVC_POLICY_FULL, whose positions
     * never change, stores them rotated as they arrive (as engines cache keys), so attention
     * reads them as stored. kvc_cache_read returns keys before RoPE either way (FULL's rotated
     * back: equal to what was appended up to the dtype's rounding, twice). FULL's
     * kvc_cache_append therefore refuses (KVC_ERROR_INVALID_ARGUMENT) a key whose rotary pair
     * has a norm past the dtype's largest value, e.g. 65504 in f16. */
    kvc_rope_style rope_style;
    float rope_theta;      /* base of the rotary frequencies, e.g. 10000 */
    uint32_t rope_dims;    /* leading dims rotated, a multiple of 8; 0 means head_dim */
    /* The policy's parameter struct (it starts with struct_size), or NULL for its defaults.
     * KVC_POLICY_FULL takes none; STREAMING, H2O, TOVA and TREEKV take kvc_eviction_params;
     * SNAPKV, PYRAMIDKV, HITKV and PHITKV take kvc_window_policy_params; FREQKV takes
     * kvc_freqkv_params; FAEDKV takes kvc_faedkv_params; FOURIER takes kvc_fourier_params. */
    const void* policy_params;
} kvc_cache_desc;

/* Means "the recent window the policy's paper sets": capacity - sinks for STREAMING, and for
 * H2O, TOVA and TREEKV max(capacity / 2 - sinks, 0) (TreeKV's setting: 4 sinks + 508 recent + 512
 * selected at capacity 1024, which its paper uses for all four methods). */
#define KVC_RECENT_WINDOW_DEFAULT 0xFFFFFFFFu

/* Parameters of the decode-time eviction policies (STREAMING, H2O, TOVA, TREEKV). `capacity`
 * of kvc_cache_desc is the cache size c each layer holds after every attend; a decode step
 * appends one token (c + 1 slots), attends, updates the scores and evicts one token on the
 * device. Kept tokens carry their in-cache rank as position (RoPE), as StreamingLLM and TreeKV
 * re-assign positions after eviction; an evicted token's slot takes the newest token, so
 * kvc_cache_read returns slots in no particular order, each with its rank as position.
 * H2O, TOVA and TREEKV keep each layer's decode logits (num_q_heads floats per slot, about 3%
 * of an f16 cache's K and V at 32 query heads, 8 kv heads and head_dim 128; kvc_cache_stats
 * counts them): on Vulkan, inside a step (kvc_step_begin) a decode step records its attention
 * alone, as FULL's does, and the step's end scores and evicts in its layers together (up to 32
 * alike a dispatch where the device indexes buffer arrays), with the same results. */
typedef struct kvc_eviction_params {
    uint32_t struct_size;
    uint32_t sinks;         /* first tokens never evicted; default 4 */
    uint32_t recent_window; /* newest tokens never evicted, or KVC_RECENT_WINDOW_DEFAULT; ignored
                             * by STREAMING (its window is capacity - sinks); sinks + window must be
                             * < the cache size of every layer */
    uint32_t chunk_slots;   /* room beyond the cache size for the tokens of one append (a prompt
                             * longer than c); default 1, one decode token; 1..2^24. The attend
                             * that follows evicts back to c: token by token under each policy's
                             * rule, or once by blocks under TREEKV (its prefill variant) */
    const uint32_t* layer_capacities; /* num_layers cache sizes, or NULL for `capacity` everywhere;
                                       * read only while the cache is created */
    uint32_t prefill_block; /* TREEKV: block size b of its prefill variant, which scores blocks
                             * by the prompt's last b queries; (c - sinks - recent_window) / b
                             * must be below 2048; default 32 */
    uint32_t select_left_token; /* TREEKV ablation (TreeKVSelectLeftToken): 1 evicts the left token
                                 * of the scope instead of the less important one in decode steps
                                 * (the prefill variant still compares blocks); default 0 */
} kvc_eviction_params;

/* Fills kvc_eviction_params with the papers' defaults: 4 sinks, KVC_RECENT_WINDOW_DEFAULT, one
 * chunk slot, no per-layer table, prefill block 32, no ablation. */
KVC_API kvc_eviction_params kvc_eviction_params_default(void);

/* FreqKV (Kai et al., "FreqKV: Key-Value Compression in Frequency Domain for Context Window
 * Extension"): `capacity` is the window N. When a layer holds N slots (checked after each
 * kvc_attend), the M = N - sink_tokens - recent_tokens slots between the sinks and the recent
 * tokens are replaced by L = floor(retain_ratio * M) slots: the lowest L components of their
 * orthonormal DCT along the sequence, transformed back and rescaled by sqrt(L / M). The recent
 * tokens are kept as they were, after the L slots. Every slot carries its index in the cache as
 * its position, so RoPE never sees a position of N or more. A chunk may hold at most
 * N - slots held tokens: feed prefill in such chunks (M - L after each compression, as the
 * paper does). Requires sink_tokens + recent_tokens < N, 0 < retain_ratio < 1, L >= 1 and
 * N <= 16384 (the fused transform is an L x M table). */
typedef struct kvc_freqkv_params {
    uint32_t struct_size;
    uint32_t sink_tokens; /* S: leading slots never compressed; the paper's default is 4 */
    float retain_ratio;   /* gamma in (0, 1): the share of components kept; default 0.5 */
    uint32_t recent_tokens; /* R: newest slots of a full window kept uncompressed; default 0 (the
                             * paper); its authors' code keeps 8 (and 8 sinks). A struct_size
                             * that ends before this field means 0 */
} kvc_freqkv_params;

/* The paper's defaults: 4 sink tokens, retain_ratio 0.5, no recent tokens (what NULL
 * policy_params means). */
KVC_API kvc_freqkv_params kvc_freqkv_params_default(void);

/* FAEDKV (Li et al., "FAEDKV: Infinite-Window Fourier Transform for Unbiased KV Cache
 * Compression"). Until kvc_cache_end_prefill the cache keeps every token (`capacity` must hold
 * the prompt). At kvc_cache_end_prefill each layer's prompt of N tokens is split into S sinks,
 * a middle segment of M = N - S - R tokens and R recent tokens (sec. 4.2.1; M >= chunks is
 * required); the segment's DFT along the sequence is cut into C chunks of contiguous bins
 * (chunk c: bins floor(cM/C) .. floor((c+1)M/C) - 1) and only the bins of the kept chunks,
 * with their mirrors M - k (a real signal's spectrum is conjugate-symmetric, so bin k and
 * M - k are stored once), are kept as complex f32. Later appends enter the recent window; the
 * tokens they push out of it are folded into the kept bins by the Infinite-Window DFT (eq. 9,
 * N being the tokens folded so far), so attention sees the sinks, the M reconstructed tokens
 * and the last R tokens (eq. 13) and never holds more (it stores one slot more: the token that
 * left the window last waits there until the next attention folds it, reading the bins once for
 * both). Attention over the segment is computed
 * from the bins (exact for the pruned spectrum; the segment is never rebuilt in memory), and
 * kvc_cache_read returns the N slots attention sees, the segment reconstructed.
 * Keys are transformed as the model stores them: FAEDKV refuses libkvc's RoPE
 * (KVC_ERROR_UNSUPPORTED); pass keys already rotated. Read positions: sinks and window their
 * token positions, reconstructed slot n of the segment S + n. kvc_attend's scores are not
 * available once the segment exists (KVC_ERROR_UNSUPPORTED). */
typedef struct kvc_faedkv_params {
    uint32_t struct_size;
    uint32_t sinks;             /* S: first tokens kept exactly; default 10 (sec. 5.1) */
    uint32_t recent_window;     /* R: newest tokens kept exactly, >= 1; default 50; an append
                                 * after the prompt holds at most R tokens */
    uint32_t chunks;            /* C: chunks the spectrum is cut into, 1..4096; default 22 */
    float retain_ratio;         /* r in (0, 1]: each layer keeps max(1, round(r * C)) chunks;
                                 * default 0.125 */
    const float* chunk_importance; /* [num_layers][chunks]: Delta_{l,c} of eq. 7 (the ablation's
                                    * perplexity increase); each layer keeps its largest. NULL:
                                    * the lowest frequencies (chunks 0, C-1, 1, C-2, ...) */
    const uint8_t* chunk_keep;  /* [num_layers][chunks]: nonzero keeps the chunk (the ablation's
                                 * table, overriding retain_ratio and chunk_importance); or NULL.
                                 * Both tables are read only while the cache is created */
} kvc_faedkv_params;

/* The paper's settings: 10 sinks, 50 recent tokens, 22 chunks, retain_ratio 0.125, the
 * lowest-frequency chunks (what NULL policy_params means). */
KVC_API kvc_faedkv_params kvc_faedkv_params_default(void);

/* FAEDKV's frequency ablation (sec. 3.2, eq. 6), for choosing chunk_importance or chunk_keep:
 * copies `layer` of a cache that holds its tokens whole (any policy before it compresses, e.g.
 * FULL after a prompt) as kvc_cache_read does, with the middle segment (after params->sinks,
 * before the last params->recent_window tokens) replaced by its inverse DFT with chunk
 * `pruned_chunk` of params->chunks zeroed, with its mirror bins. Running the model on it and
 * measuring perplexity gives Delta_{l,c} of eq. 7 (README). params NULL: the defaults. Runs on
 * the host in O(M^2 / C * head_dim) per kv head. Fails with KVC_ERROR_BAD_STATE when the layer
 * holds fewer than sinks + recent_window + chunks tokens. */
KVC_API kvc_status kvc_faedkv_ablate(kvc_cache* cache, uint32_t layer, const kvc_faedkv_params* params,
                                     uint32_t pruned_chunk, uint32_t max_slots, kvc_dtype dtype, void* k, void* v);

/* FourierAttention (Liu et al., "Beyond Homogeneous Attention: Memory-Efficient LLMs via
 * Fourier-Approximated KV Cache"). Until kvc_cache_end_prefill the cache keeps every token
 * (`capacity` must hold the prompt, and every token decoded after it). From then on, once a
 * layer holds more than sinks + 2 num_states + local_window tokens (at kvc_cache_end_prefill,
 * or after the kvc_attend that passes it), its tokens are split into the sinks, the middle and
 * the local window (sec. 3.3, eq. 1-2). In the middle, the chosen head dims of K and of V
 * become 2N real coefficients per dim, C = (1/T) F X with eq. 4's translated Fourier basis
 * (F's rows cos and sin of 2 pi n t / T, n < N, t the token's index in the middle); the other
 * dims keep every token. Each later append pushes the window's oldest tokens into the middle
 * (eq. 6: their term is added to C). Attention takes the middle's compressed dims from their
 * coefficients (eq. 5; nothing is rebuilt in memory: on Vulkan by two length-T transforms per
 * query head) with appendix D's per-dim standardization
 * (the mean and standard deviation of the rebuilt dim matched to the original's over the
 * middle at compression). Which dims: `key_dims` / `value_dims`, or sec. 3.4's choice, the dims
 * whose standardized reconstruction errs least, made per kv head when the layer is compressed;
 * how many: round(ratio * head_dim) per kv head, clamped to 1..head_dim-1, under
 * `key_ratios` / `value_ratios` or the paper's inverted pyramid (last 8 layers K 0.5 / V 0.7,
 * else first 4 layers K 0.9 / V 0.95, else 0.8 / 0.8). Keys are compressed as the model
 * stores them: FOURIER refuses libkvc's RoPE (KVC_ERROR_UNSUPPORTED); pass rotated keys.
 * After compression an append holds at most local_window tokens, kvc_attend takes one query
 * and gives no scores (KVC_ERROR_UNSUPPORTED), and kvc_cache_read returns the sinks, the
 * middle rebuilt (positions sinks + t) and the window. Requires sinks + local_window <
 * capacity, 1 <= num_states, 2 num_states <= window_length <= 2^24 and window_length >=
 * capacity - sinks - local_window (no middle index wraps). */
typedef struct kvc_fourier_params {
    uint32_t struct_size;
    uint32_t sinks;            /* L_init: first tokens kept whole; default 4 */
    uint32_t local_window;     /* L_local: newest tokens kept whole; default 1024 */
    uint32_t num_states;       /* N: 2N real coefficients per compressed dim; default 512 */
    uint32_t window_length;    /* T: the translated window, the maximum context (sec. 3.3); 0,
                                * the default, means `capacity`. Decode is fastest on Vulkan
                                * where T is a multiple of the least power of two >= 2N and
                                * N <= 1024 (its transforms then run in shared memory) */
    const float* key_ratios;   /* [num_layers] shares of K's head dims compressed, each in (0, 1),
                                * or NULL for the inverted pyramid */
    const float* value_ratios; /* the same for V */
    const uint8_t* key_dims;   /* [num_layers][num_kv_heads][head_dim]: nonzero compresses the
                                * dim (the same count for every kv head of a layer, in
                                * 1..head_dim-1; overrides key_ratios), or NULL: sec. 3.4's choice */
    const uint8_t* value_dims; /* the same for V. Tables are read only while the cache is created */
} kvc_fourier_params;

/* The paper's settings (sec. 4.1): 4 sinks, a local window of 1024, N = 512, T = capacity,
 * the inverted pyramid, dims chosen by reconstruction error (what NULL policy_params means). */
KVC_API kvc_fourier_params kvc_fourier_params_default(void);

/* Fills a descriptor with defaults (f32, FULL policy, no RoPE, theta 10000); the shape and
 * capacity are left 0 for the caller to set. */
KVC_API kvc_cache_desc kvc_cache_desc_default(void);

/* Creates an empty cache and allocates storage for `capacity` slots per layer. Fails with
 * KVC_ERROR_CAPACITY, naming the limit, when one layer's K (num_kv_heads x slots x head_dim x
 * dtype bytes) passes what one storage-buffer binding covers (maxStorageBufferRange). */
KVC_API kvc_status kvc_cache_create(kvc_context* context, const kvc_cache_desc* desc,
                                    kvc_cache** out_cache);

/* Destroys a cache. NULL is a no-op. On Vulkan the context keeps its device memory for the next
 * cache or frees it off the caller's thread (kvc_context_trim gives it all back). */
KVC_API void kvc_cache_destroy(kvc_cache* cache);

/* Appends n_tokens new tokens (a prefill chunk, or 1 for a decode step) of `layer`. Each
 * token takes the next position of this layer: 0, 1, 2, ... (KVC_POLICY_FREQKV: its slot
 * index). Fails with KVC_ERROR_CAPACITY when the layer would hold more than `capacity` slots.
 * Every check that needs no data (layer, n_tokens, capacity) runs before k and v are read. */
KVC_API kvc_status kvc_cache_append(kvc_cache* cache, uint32_t layer, uint32_t n_tokens,
                                    kvc_dtype dtype, const void* k, const void* v);

/* Attention of the last n_queries appended tokens of `layer` over the cache: query i sees
 * every slot before the chunk and the chunk's tokens up to itself (causal). Writes `out`
 * ([n_queries][num_q_heads][head_dim]). When `scores` is not NULL it receives, per kv head
 * and slot ([num_kv_heads][slots_held]), the attention probability summed over the kv head's
 * query heads and the chunk's queries. Fails with KVC_ERROR_BAD_STATE when the last append
 * of this layer held fewer than n_queries tokens or none was made, and with KVC_ERROR_CAPACITY
 * when Q's bytes pass what one binding covers; both before q is read. */
KVC_API kvc_status kvc_attend(kvc_cache* cache, uint32_t layer, uint32_t n_queries,
                              kvc_dtype dtype, const void* q, void* out, float* scores);

/* Slots `layer` holds now, as attention and kvc_cache_read see them (FAEDKV after the prompt:
 * sinks + the reconstructed segment + the recent window, of which kvc_cache_stats counts only
 * the slots it stores: the sinks, the window and a spare slot, where the token that left the
 * window last waits until the next attention folds it). */
KVC_API kvc_status kvc_cache_layer_slots(const kvc_cache* cache, uint32_t layer,
                                         uint32_t* out_slots);

/* Copies the cache of `layer` as attention sees it: k and v as [num_kv_heads][slots][head_dim]
 * in the cache dtype (keys before RoPE; see rope_style), positions as [num_kv_heads][slots]. `max_slots` is
 * the room each output has, per kv head; any output may be NULL. */
KVC_API kvc_status kvc_cache_read(kvc_cache* cache, uint32_t layer, uint32_t max_slots,
                                  kvc_dtype dtype, void* k, void* v, int32_t* positions);

typedef struct kvc_cache_stats {
    uint32_t struct_size;
    uint64_t tokens_seen;       /* tokens appended, summed over layers */
    uint64_t slots_held;        /* slots held now, summed over layers */
    uint64_t device_bytes_held; /* device bytes the cache holds: every layer's K, V and positions
                                 * as allocated now, the RoPE table, and its policy's own state
                                 * (scores, the window's queries, each layer's decode logits for H2O,
                                 * TOVA and TREEKV); it follows what the policy keeps. The context's shared
                                 * work memory is kvc_context_info.work_bytes_held */
    uint64_t bytes_per_slot;    /* bytes one slot of one layer takes (K + V of all kv heads + positions) */
    uint64_t compressions;      /* compression or eviction steps run so far */
} kvc_cache_stats;

/* Counters and memory of a cache. Set stats->struct_size before the call. */
KVC_API kvc_status kvc_cache_stats_get(const kvc_cache* cache, kvc_cache_stats* stats);

/* ---------------------------------------------------------------- observation-window policies */

/* Parameters of KVC_POLICY_SNAPKV, _PYRAMIDKV, _HITKV and _PHITKV. These policies keep the
 * whole prompt (so `capacity` must hold the longest prompt plus the tokens decoded after it)
 * and, at kvc_cache_end_prefill, shrink each layer longer than its budget to that budget:
 * the last `window` prompt tokens plus the prefix tokens the policy's indicator selects. */
typedef struct kvc_window_policy_params {
    uint32_t struct_size;
    uint32_t budget;         /* tokens a layer keeps, window included; window < budget <= capacity.
                              * PYRAMIDKV/PHITKV: the average over layers. Default 1024 (capped
                              * at capacity when policy_params is NULL) */
    uint32_t window;         /* observation window: the last prompt tokens, always kept; default 32 */
    uint32_t pool_kernel;    /* SNAPKV/PYRAMIDKV: odd max-pooling kernel over the scores; default 7 */
    uint32_t hit_k;          /* HITKV/PHITKV: hit coefficient K (a hit is a place in a window
                              * query's top K); 0, the default, means the layer's budget */
    float hit_threshold;     /* HITKV/PHITKV: theta, keep keys with hit rate >= theta; default 0.5 */
    float pyramid_beta;      /* PYRAMIDKV/PHITKV: the last layer keeps (budget - window) / beta
                              * prefix tokens, the first twice the average less that; default 20 */
    const uint32_t* layer_budgets; /* PYRAMIDKV/PHITKV: a per-layer table replacing the schedule,
                                    * num_layers entries, each in window+1..capacity; or NULL */
    uint32_t num_layer_budgets;    /* entries of layer_budgets, 0 when it is NULL */
    uint32_t decode_slots;         /* slots a compacted layer keeps for the tokens decoded after
                                    * the prompt (budget + decode_slots, at most capacity), or
                                    * KVC_DECODE_SLOTS_DEFAULT (0): capacity less the prompt's
                                    * length, the room `capacity` left. Added in 0.2 where 0.1's
                                    * struct had padding, which its default initialiser zeroes */
} kvc_window_policy_params;

/* kvc_window_policy_params.decode_slots: as many as `capacity` allowed after this prompt. */
#define KVC_DECODE_SLOTS_DEFAULT 0u

/* The papers' settings: budget 1024, window 32, pool kernel 7, K = budget, theta 0.5, beta 20,
 * no per-layer table, KVC_DECODE_SLOTS_DEFAULT. */
KVC_API kvc_window_policy_params kvc_window_policy_params_default(void);

/* Ends the prompt: call it once every prompt token of every layer was appended and attended
 * (the window's queries come from those kvc_attend calls). Under the observation-window
 * policies each layer longer than its budget is compacted to it into new storage of budget +
 * decode_slots slots, and the prompt's storage is released; decoding then appends as usual.
 * Memory: until this call every layer holds its whole prompt (capacity slots allocated), and
 * during it the new storage of every compacted layer is held beside the old one, so the peak
 * is capacity + budget + decode_slots slots per layer, plus the selection's scores of every
 * compacted layer (8 bytes per prompt slot, kv head and layer; released when the call's work
 * is done). Other policies ignore it. Fails with
 * KVC_ERROR_BAD_STATE, changing nothing, when a layer to compact did not attend its last
 * `window` prompt tokens. */
KVC_API kvc_status kvc_cache_end_prefill(kvc_cache* cache);

/* Forgets every token; storage stays allocated (a compacted layer's smaller storage grows
 * back to `capacity` slots). */
KVC_API kvc_status kvc_cache_reset(kvc_cache* cache);

/* ---------------------------------------------------------------- device buffers */

/* Memory on the context's device for Q, K, V, outputs and scores, so that an engine whose
 * tensors already live on the GPU never sends them through the host. On the CPU backend a
 * buffer is host memory. */
typedef struct kvc_buffer kvc_buffer;

/* A tensor inside a buffer: it starts `offset` bytes in and is laid out as the host arrays
 * above. `offset` is a multiple of kvc_context_info.buffer_offset_alignment. */
typedef struct kvc_buffer_view {
    kvc_buffer* buffer;
    uint64_t offset;
} kvc_buffer_view;

/* Allocates `bytes` of device memory (contents undefined). */
KVC_API kvc_status kvc_buffer_create(kvc_context* context, uint64_t bytes, kvc_buffer** out_buffer);

/* Uses `bytes` of an application's VkBuffer from `offset` on, without copying: the context
 * must come from kvc_context_create_from_vulkan, and the buffer must have been created on that
 * device with VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
 * VK_BUFFER_USAGE_TRANSFER_DST_BIT. The application keeps ownership: destroy the kvc_buffer
 * (and let every step that used it finish) before the VkBuffer. libkvc's work begins with a
 * barrier, so writes the application submitted earlier on the context's queue are seen; from
 * another queue, order them with a semaphore. */
KVC_API kvc_status kvc_buffer_wrap_vulkan(kvc_context* context, void* vk_buffer, uint64_t offset, uint64_t bytes,
                                          kvc_buffer** out_buffer);

/* Destroys a buffer (an application's VkBuffer stays). Work already recorded that uses it
 * keeps its memory alive until that work finished. NULL is a no-op. */
KVC_API void kvc_buffer_destroy(kvc_buffer* buffer);

/* Bytes the buffer spans. */
KVC_API kvc_status kvc_buffer_size(const kvc_buffer* buffer, uint64_t* out_bytes);

/* Copies `bytes` of host memory into the buffer at `offset` (inside a step: taken from `src`
 * now, written on the device in the step's order). */
KVC_API kvc_status kvc_buffer_write(kvc_buffer* buffer, uint64_t offset, uint64_t bytes, const void* src);

/* Copies `bytes` of the buffer at `offset` to host memory (inside a step: `dst` is written
 * when kvc_step_wait returns KVC_OK). */
KVC_API kvc_status kvc_buffer_read(kvc_buffer* buffer, uint64_t offset, uint64_t bytes, void* dst);

/* kvc_cache_append with K and V in device buffers of the cache's context. Device inputs are
 * not checked for NaN or Inf (that would need a read-back): the host path checks them. The
 * count and capacity checks come before the views' (KVC_ERROR_BUFFER_TOO_SMALL). */
KVC_API kvc_status kvc_cache_append_device(kvc_cache* cache, uint32_t layer, uint32_t n_tokens, kvc_dtype dtype,
                                           kvc_buffer_view k, kvc_buffer_view v);

/* kvc_attend with Q, the output and (optionally: a view with a NULL buffer means none) the
 * scores in device buffers of the cache's context; kvc_attend's checks come before the views'. */
KVC_API kvc_status kvc_attend_device(kvc_cache* cache, uint32_t layer, uint32_t n_queries, kvc_dtype dtype,
                                     kvc_buffer_view q, kvc_buffer_view out, kvc_buffer_view scores);

/* One decode token of `layer`: appends its K and V ([num_kv_heads][head_dim]) and attends its
 * query ([num_q_heads][head_dim]) into `out`, what kvc_cache_append_device(cache, layer, 1,
 * dtype, k, v) then kvc_attend_device(cache, layer, 1, dtype, q, out, no scores) do, with the
 * same results up to f32 summation order. Both calls' checks run before anything changes. On
 * Vulkan, a cache whose policy's decode is plain attention over the slots it holds (FULL,
 * FREQKV, SNAPKV, PYRAMIDKV, HITKV, PHITKV) has the token written inside the attention's own
 * dispatch: a layer's decode records one dispatch and waits at one barrier fewer than the
 * two calls (docs/benchmarks.md). The other policies record the two calls' work. */
KVC_API kvc_status kvc_decode_device(kvc_cache* cache, uint32_t layer, kvc_dtype dtype, kvc_buffer_view k, kvc_buffer_view v,
                                     kvc_buffer_view q, kvc_buffer_view out);

/* The most caches one kvc_attend_batch_device call takes. */
#define KVC_ATTEND_BATCH_MAX_CACHES 4096u

/* One decode step of `layer` for n_caches caches of `context` at once: for each i, what
 * kvc_attend_device(caches[i], layer, 1, dtype, q[i], out[i], scores ? scores[i] : no view)
 * does, the query being the newest token each cache appended. The caches share num_q_heads,
 * num_kv_heads, head_dim, dtype and RoPE; each keeps its own length and policy, and each
 * policy does its per-step work (eviction, ...) after the attention as kvc_attend_device does.
 * On Vulkan, the caches whose attention is the plain op (every policy but FAEDKV and FOURIER)
 * and that need no scores (none asked for, none read by their policy: H2O, TOVA, TreeKV, ...
 * read them) share one decode dispatch and one merge dispatch per group: the device's
 * descriptor limits set a group's size (lavapipe 7 caches, most GPUs 32), and caches that store
 * keys rotated (FULL with RoPE) group apart from those that rotate them as read. The other
 * caches attend on their own inside the same call. `scores` may be NULL, or hold views with a
 * NULL buffer for none. A batched output equals kvc_attend_device's up to f32 summation order
 * (the batch splits a cache's slots differently). Every check runs before anything changes,
 * and a message names the failing index: n_caches from 1 to KVC_ATTEND_BATCH_MAX_CACHES and no
 * NULL array first, then index by index in order: the cache (not NULL, of `context`, listed
 * once, caches[0]'s dtype, the others' shape alike), its kvc_attend_device checks, then its
 * q, out and scores views. */
KVC_API kvc_status kvc_attend_batch_device(kvc_context* context, uint32_t n_caches, kvc_cache* const* caches, uint32_t layer,
                                           kvc_dtype dtype, const kvc_buffer_view* q, const kvc_buffer_view* out,
                                           const kvc_buffer_view* scores);

/* The most caches one kvc_cache_append_batch_device call takes: as many as
 * kvc_attend_batch_device takes, so that one list of a step's caches serves both. */
#define KVC_APPEND_BATCH_MAX_CACHES KVC_ATTEND_BATCH_MAX_CACHES

/* Appends a chunk of n_tokens to `layer` of n_caches caches of `context` at once: for each i,
 * what kvc_cache_append_device(caches[i], layer, n_tokens, dtype, k[i], v[i]) does, bit for
 * bit. The caches share num_q_heads, num_kv_heads, head_dim, dtype and RoPE; each keeps its own
 * length and policy. On Vulkan every cache's chunk lands in one dispatch per group, whatever
 * its policy: the device's descriptor limits set a group's size (lavapipe 6 chunks, most GPUs
 * 32); FAEDKV and FOURIER, once compressed, first fold the tokens leaving their window on their
 * own as on every append (FAEDKV's last one waits for the next attention), and a chunk that
 * wraps their window takes two places in a group. A group of one chunk, a device that cannot
 * index storage-buffer arrays dynamically, and every chunk under the environment variable
 * KVC_BATCH_DECODE=per_cache (a benchmark's comparison switch, which also turns off
 * kvc_attend_batch_device's batched kernels) take the one-cache append kernel instead, with the
 * same results.
 * Device inputs are not checked for NaN or Inf (as kvc_cache_append_device's). Every check
 * runs before anything changes, and a message names the failing index: n_caches from 1 to
 * KVC_APPEND_BATCH_MAX_CACHES and no NULL array first, then index by index in order: the cache
 * (not NULL, of `context`, listed once, caches[0]'s dtype, the others' shape alike), its
 * kvc_cache_append_device checks, then its k and v views. */
KVC_API kvc_status kvc_cache_append_batch_device(kvc_context* context, uint32_t n_caches, kvc_cache* const* caches, uint32_t layer,
                                                 uint32_t n_tokens, kvc_dtype dtype, const kvc_buffer_view* k,
                                                 const kvc_buffer_view* v);

/* ---------------------------------------------------------------- steps: one submission per model step */

/* A step records the work of many calls (every layer's append and attend, the policies'
 * scoring, eviction, compression and selection, kvc_cache_end_prefill, buffer reads and
 * writes) on one context into one command buffer, submitted once: between kvc_step_begin and
 * kvc_step_end those calls validate their arguments, update the caches' bookkeeping and record
 * their device work, but run nothing and wait for nothing. A call that fails a check of its
 * arguments or state inside a step records nothing and changes nothing; the step stays valid.
 * A call that fails on the device (out of memory, a Vulkan error) breaks the step: kvc_step_end
 * then submits nothing and puts every cache the step used back as it was at kvc_step_begin. Outside a step every call is its
 * own step, begun, ended and waited for. Host arrays passed inside a step are read during the
 * call; host outputs (kvc_attend's out and scores, kvc_buffer_read) are written when
 * kvc_step_wait returns KVC_OK. kvc_cache_create, kvc_cache_read, kvc_cache_reset and
 * kvc_context_trim are refused inside a step (KVC_ERROR_BAD_STATE). On the CPU backend every call runs at once and
 * a step only groups them. On Vulkan a command waits for the earlier ones only where one of
 * them writes bytes the other reads or writes: the results are those of the calls in order,
 * and in libkvc's own command buffer work of different calls that share no such bytes (other
 * caches', other layers') may run at the same time. */

/* Starts recording a step into libkvc's own command buffer. Waits for the previous step
 * first if it is still running. Fails with KVC_ERROR_BAD_STATE when a step is open. */
KVC_API kvc_status kvc_step_begin(kvc_context* context);

/* Starts recording a step into an application's VkCommandBuffer (passed as void*), which must
 * be in the recording state, on a queue family with compute (a context from
 * kvc_context_create_from_vulkan). Synchronization contract:
 *  - before: libkvc's first command waits (a global memory barrier) for every compute-shader
 *    and transfer write recorded before it in `command_buffer`, so Q, K and V written by the
 *    application's kernels or copies just before are seen;
 *  - between: the application may record its own commands between libkvc's calls (a layer's
 *    projections between two layers' attends); each call's first command waits for them as
 *    at the step's start. The application's commands are ordered after libkvc's accesses (its
 *    reads of what they write, its writes of what they read or write) only by a barrier the
 *    application records: libkvc records none after a call (inside a call its commands wait
 *    for each other only where one writes what another binds);
 *  - after: kvc_step_end records a barrier that makes every libkvc write available to compute
 *    shaders and transfers recorded after it (the attention output, the scores);
 *  - libkvc leaves its own compute pipeline, descriptor set and push constants bound;
 *  - the application submits the command buffer, and it must have completed (or been
 *    discarded) before the next step on this context begins or any other call on the context
 *    runs: libkvc then reuses the step's descriptor sets, staging and scratch memory.
 * Host outputs are refused in such a step (KVC_ERROR_BAD_STATE): read results through device
 * buffers. Host inputs are staged as usual. */
KVC_API kvc_status kvc_step_begin_commands(kvc_context* context, void* command_buffer);

/* Ends the open step: records the work its calls left for its end (the H2O, TOVA and TREEKV
 * caches' scoring and eviction, layers alike together), then submits libkvc's command buffer
 * without waiting (a step begun with kvc_step_begin), or records the closing barrier into the
 * application's (begun with kvc_step_begin_commands; the application submits it). Fails with
 * KVC_ERROR_BAD_STATE and submits nothing when a call in the step failed on the device (out of
 * memory, a Vulkan error; argument and state errors record nothing), with that status when
 * recording the left work fails, and with the submission's status when the submission fails;
 * either way every cache the step used is back as it was at kvc_step_begin.
 * Do not submit an application's command buffer that holds a failed step. */
KVC_API kvc_status kvc_step_end(kvc_context* context);

/* Waits at most `timeout_ns` nanoseconds (0 polls, UINT64_MAX waits as long as it takes) for
 * the last step ended with kvc_step_end to finish on the device. KVC_OK: done, and its host
 * outputs are written; KVC_TIMEOUT: still running, ask again. KVC_OK at once when there is
 * nothing to wait for, which includes a step recorded into an application's command buffer
 * (wait on the application's own fence). KVC_ERROR_BAD_STATE while a step is open. */
KVC_API kvc_status kvc_step_wait(kvc_context* context, uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif
#endif /* KVC_KVC_H */
