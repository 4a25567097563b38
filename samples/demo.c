/* libkvc demo: streams tokens (a prefill in chunks, then decode steps) through a small
 * model-shaped cache under every policy, on the default device (a GPU, lavapipe, or the CPU
 * when no Vulkan exists) and on the CPU reference side by side, and prints per policy the
 * memory held beside what it costs: the error of its decode attention against FULL's on the
 * same stream; and the agreement of every output with the CPU reference. The device runs the
 * engine path: Q, K, V and outputs in device buffers, and every layer of a model step recorded
 * into one submission (kvc_step_*); the reference runs the convenient host-array calls.
 *
 *   kvc-demo [decode_steps]      (default 300, after a 768-token prefill in chunks of 192)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvc/kvc.h>

enum { LAYERS = 2, Q_HEADS = 8, KV_HEADS = 2, HEAD_DIM = 64, PREFILL = 768, CHUNK = 192 };
enum { KV_ROW = KV_HEADS * HEAD_DIM, Q_ROW = Q_HEADS * HEAD_DIM }; /* one token's K (or V), Q (or output) */

#define CHECK_OK(call)                                                                           \
  do {                                                                                           \
    kvc_status status_ = (call);                                                                 \
    if (status_ != KVC_OK) {                                                                     \
      fprintf(stderr, "%s failed: %s: %s\n", #call, kvc_status_name(status_), kvc_context_last_error(device)); \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

static kvc_context* device;

static float random_unit(uint64_t* state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*state >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static void fill(float* data, size_t count, uint64_t* state) {
  for (size_t i = 0; i < count; ++i) data[i] = random_unit(state);
}

/* The stream. With uniformly random keys attention is near-flat, and every policy's output is
 * near the same mean of the values, whatever it keeps: no trade-off shows. So, as in models,
 * whose attention peaks on a few tokens, every query leans along one direction and one token
 * in HEAVY_EVERY ("heavy") has keys far along it: about 4 logits above the rest, such a token
 * draws ~50 times an ordinary one's weight wherever it lies. The direction spans the pairs
 * NeoX RoPE turns slowest (dims 28..31 and 60..63: at most 0.35 rad over 1,000 tokens), so
 * the tokens' positions barely move it. Values stay random. */
enum { HEAVY_EVERY = 16, LEAN_DIMS = 8 };
static const uint32_t lean_dims[LEAN_DIMS] = {28, 29, 30, 31, 60, 61, 62, 63};
static const float QUERY_LEAN = 4.0f, HEAVY_KEY = 8.0f; /* lengths along the unit direction */

/* One token of one layer: K [KV_HEADS][HEAD_DIM], V likewise, Q [Q_HEADS][HEAD_DIM]. */
static void fill_token(float* k, float* v, float* q, uint64_t* state) {
  const int heavy = random_unit(state) < -1.0f + 2.0f / HEAVY_EVERY;
  fill(k, KV_ROW, state);
  fill(v, KV_ROW, state);
  fill(q, Q_ROW, state);
  const float unit = 1.0f / sqrtf((float)LEAN_DIMS);
  for (uint32_t i = 0; i < LEAN_DIMS; ++i) {
    for (uint32_t head = 0; heavy && head < KV_HEADS; ++head) k[head * HEAD_DIM + lean_dims[i]] += HEAVY_KEY * unit;
    for (uint32_t head = 0; head < Q_HEADS; ++head) q[head * HEAD_DIM + lean_dims[i]] += QUERY_LEAN * unit;
  }
}

/* ||a - b|| / ||b|| over `count` values. */
static double relative_error(const float* a, const float* b, size_t count) {
  double difference = 0.0, norm = 0.0;
  for (size_t i = 0; i < count; ++i) {
    difference += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    norm += (double)b[i] * b[i];
  }
  return sqrt(difference / norm);
}

/* A policy as the demo runs it: its parameters and how large its cache is. */
typedef struct demo_policy {
  const char* name;
  kvc_policy policy;
  uint32_t capacity;
  const void* params;
  int ends_prefill; /* the observation-window policies, FAEDKV and FOURIER act when the prompt ends */
} demo_policy;

/* Streams the same tokens through `policy` on the device and on the CPU reference; keeps the
 * device's attention outputs of the decode steps in `decode_outputs` ([step][layer][Q_ROW]);
 * returns the largest attention-output difference relative to the output scale. */
/* FAEDKV and FOURIER transform keys as the model stores them, after its RoPE: libkvc applies none. */
static kvc_rope_style rope_of(kvc_policy policy) {
  return policy == KVC_POLICY_FAEDKV || policy == KVC_POLICY_FOURIER ? KVC_ROPE_NONE : KVC_ROPE_NEOX;
}

static double run_policy(kvc_context* reference, const demo_policy* p, kvc_rope_style rope, uint32_t decode_steps,
                         float* decode_outputs, kvc_cache_stats* stats) {
  kvc_cache_desc desc = kvc_cache_desc_default();
  desc.num_layers = LAYERS;
  desc.num_q_heads = Q_HEADS;
  desc.num_kv_heads = KV_HEADS;
  desc.head_dim = HEAD_DIM;
  desc.dtype = KVC_DTYPE_F32;
  desc.capacity = p->capacity;
  desc.policy = p->policy;
  desc.policy_params = p->params;
  desc.rope_style = rope;
  kvc_cache *cache = NULL, *reference_cache = NULL;
  CHECK_OK(kvc_cache_create(device, &desc, &cache));
  CHECK_OK(kvc_cache_create(reference, &desc, &reference_cache));

  /* Every layer's inputs and outputs of one step, host side (the engine would have them on the
   * device already) and in one device buffer each, a layer's part aligned as views must be. */
  kvc_context_info info = {sizeof(kvc_context_info)};
  CHECK_OK(kvc_context_info_get(device, &info));
  const size_t kv_bytes = (size_t)CHUNK * KV_ROW * sizeof(float), q_bytes = (size_t)CHUNK * Q_ROW * sizeof(float);
  const size_t kv_stride = (kv_bytes + info.buffer_offset_alignment - 1) / info.buffer_offset_alignment * info.buffer_offset_alignment;
  const size_t q_stride = (q_bytes + info.buffer_offset_alignment - 1) / info.buffer_offset_alignment * info.buffer_offset_alignment;
  float* k = malloc(LAYERS * kv_bytes);
  float* v = malloc(LAYERS * kv_bytes);
  float* q = malloc(LAYERS * q_bytes);
  float* out = malloc(LAYERS * q_bytes);
  float* expected = malloc(q_bytes);
  kvc_buffer *k_dev = NULL, *v_dev = NULL, *q_dev = NULL, *out_dev = NULL;
  CHECK_OK(kvc_buffer_create(device, LAYERS * kv_stride, &k_dev));
  CHECK_OK(kvc_buffer_create(device, LAYERS * kv_stride, &v_dev));
  CHECK_OK(kvc_buffer_create(device, LAYERS * q_stride, &q_dev));
  CHECK_OK(kvc_buffer_create(device, LAYERS * q_stride, &out_dev));
  uint64_t state = 42;
  double worst = 0.0;
  for (uint32_t done = 0; done < PREFILL + decode_steps;) {
    const uint32_t n = done < PREFILL ? CHUNK : 1;
    const size_t kv_count = (size_t)n * KV_ROW, q_count = (size_t)n * Q_ROW;
    for (uint32_t layer = 0; layer < LAYERS; ++layer)
      for (uint32_t token = 0; token < n; ++token)
        fill_token(k + layer * kv_count + token * KV_ROW, v + layer * kv_count + token * KV_ROW, q + layer * q_count + token * Q_ROW,
                   &state);
    /* One model step on the device: recorded layer by layer, submitted once, waited once. */
    CHECK_OK(kvc_step_begin(device));
    for (uint32_t layer = 0; layer < LAYERS; ++layer) {
      const kvc_buffer_view k_at = {k_dev, layer * kv_stride}, v_at = {v_dev, layer * kv_stride};
      const kvc_buffer_view q_at = {q_dev, layer * q_stride}, out_at = {out_dev, layer * q_stride}, no_scores = {NULL, 0};
      CHECK_OK(kvc_buffer_write(k_dev, k_at.offset, kv_count * sizeof(float), k + layer * kv_count));
      CHECK_OK(kvc_buffer_write(v_dev, v_at.offset, kv_count * sizeof(float), v + layer * kv_count));
      CHECK_OK(kvc_buffer_write(q_dev, q_at.offset, q_count * sizeof(float), q + layer * q_count));
      if (n == 1) { /* a decode token: its append and attention in one call */
        CHECK_OK(kvc_decode_device(cache, layer, KVC_DTYPE_F32, k_at, v_at, q_at, out_at));
      } else {
        CHECK_OK(kvc_cache_append_device(cache, layer, n, KVC_DTYPE_F32, k_at, v_at));
        CHECK_OK(kvc_attend_device(cache, layer, n, KVC_DTYPE_F32, q_at, out_at, no_scores));
      }
      CHECK_OK(kvc_buffer_read(out_dev, out_at.offset, q_count * sizeof(float), out + layer * q_count));
    }
    if (done + n == PREFILL && p->ends_prefill) CHECK_OK(kvc_cache_end_prefill(cache));
    CHECK_OK(kvc_step_end(device));
    CHECK_OK(kvc_step_wait(device, UINT64_MAX));
    if (done >= PREFILL) memcpy(decode_outputs + (size_t)(done - PREFILL) * LAYERS * Q_ROW, out, LAYERS * Q_ROW * sizeof(float));

    for (uint32_t layer = 0; layer < LAYERS; ++layer) {
      CHECK_OK(kvc_cache_append(reference_cache, layer, n, KVC_DTYPE_F32, k + layer * kv_count, v + layer * kv_count));
      CHECK_OK(kvc_attend(reference_cache, layer, n, KVC_DTYPE_F32, q + layer * q_count, expected, NULL));
      double max_error = 0.0, scale = 0.0;
      for (size_t i = 0; i < q_count; ++i) {
        max_error = fmax(max_error, fabs((double)out[layer * q_count + i] - expected[i]));
        scale = fmax(scale, fabs((double)expected[i]));
      }
      worst = fmax(worst, max_error / scale);
    }
    done += n;
    if (done == PREFILL && p->ends_prefill) CHECK_OK(kvc_cache_end_prefill(reference_cache));
  }
  stats->struct_size = sizeof(kvc_cache_stats);
  CHECK_OK(kvc_cache_stats_get(cache, stats));
  free(k), free(v), free(q), free(out), free(expected);
  kvc_buffer_destroy(k_dev), kvc_buffer_destroy(v_dev), kvc_buffer_destroy(q_dev), kvc_buffer_destroy(out_dev);
  kvc_cache_destroy(cache);
  kvc_cache_destroy(reference_cache);
  return worst;
}

int main(int argc, char** argv) {
  const long steps_asked = argc > 1 ? strtol(argv[1], NULL, 10) : 300;
  if (steps_asked < 1 || steps_asked > 100000) {
    fprintf(stderr, "usage: kvc-demo [decode steps, 1..100000; default 300]\n");
    return 2;
  }
  const uint32_t decode_steps = (uint32_t)steps_asked;
  kvc_context_desc context_desc = kvc_context_desc_default();
  kvc_context* reference = NULL;
  if (kvc_context_create(&context_desc, &device) != KVC_OK) {
    fprintf(stderr, "no context: %s\n", kvc_last_create_error());
    return 1;
  }
  context_desc.backend = KVC_BACKEND_CPU;
  if (kvc_context_create(&context_desc, &reference) != KVC_OK) return 1;
  kvc_context_info info = {sizeof(kvc_context_info)};
  CHECK_OK(kvc_context_info_get(device, &info));
  printf("libkvc %s on %s (%s)\n", kvc_version_string(), info.device_name,
         info.backend == KVC_BACKEND_VULKAN ? "Vulkan" : "CPU backend");
  printf("%u layers x %u q / %u kv heads x head_dim %u, f32, NeoX RoPE (FAEDKV, FOURIER: none); %u-token prefill in chunks of %u, then %u decode steps\n",
         LAYERS, Q_HEADS, KV_HEADS, HEAD_DIM, PREFILL, CHUNK, decode_steps);
  printf("stream: random K, V, Q, but queries lean along one direction and 1 token in %d has keys far along it, so attention "
         "peaks on those tokens as in a model\n", HEAVY_EVERY);

  /* The eviction policies keep 512 slots; the window policies keep a 256-token budget from the
   * prompt in storage for it and the decode steps (the prompt's storage is released); FULL
   * holds everything. */
  kvc_freqkv_params freqkv = kvc_freqkv_params_default();
  kvc_faedkv_params faedkv = kvc_faedkv_params_default();
  kvc_fourier_params fourier = kvc_fourier_params_default();
  fourier.local_window = 128; /* 4 sinks + 2 x 64 states + 128 < 768: the prompt ends compressed */
  fourier.num_states = 64;
  kvc_eviction_params eviction = kvc_eviction_params_default();
  eviction.chunk_slots = CHUNK; /* room for one prefill chunk beyond the cache size */
  kvc_window_policy_params window = kvc_window_policy_params_default();
  window.budget = 256;
  const uint32_t total = PREFILL + decode_steps;
  const demo_policy policies[] = {
      {"FULL", KVC_POLICY_FULL, total, NULL, 0},
      {"STREAMING", KVC_POLICY_STREAMING, 512, &eviction, 0},
      {"H2O", KVC_POLICY_H2O, 512, &eviction, 0},
      {"TOVA", KVC_POLICY_TOVA, 512, &eviction, 0},
      {"TREEKV", KVC_POLICY_TREEKV, 512, &eviction, 0},
      {"SNAPKV", KVC_POLICY_SNAPKV, total, &window, 1},
      {"PYRAMIDKV", KVC_POLICY_PYRAMIDKV, total, &window, 1},
      {"HITKV", KVC_POLICY_HITKV, total, &window, 1},
      {"PHITKV", KVC_POLICY_PHITKV, total, &window, 1},
      /* FreqKV's window N: the prompt's chunks fill it to 768, decoding to 772, then it compresses. */
      {"FREQKV", KVC_POLICY_FREQKV, PREFILL + 4, &freqkv, 0},
      /* FAEDKV: 10 sinks, 50 recent tokens and 3 of 22 chunks of the 708-token middle's spectrum. */
      {"FAEDKV", KVC_POLICY_FAEDKV, PREFILL, &faedkv, 1},
      /* The prompt's middle (636 tokens) becomes coefficients when it ends; decoding folds into them. */
      {"FOURIER", KVC_POLICY_FOURIER, total, &fourier, 1},
  };
  /* FULL runs first: every other policy's decode outputs are compared with its, under the same
   * RoPE (FULL without RoPE too, for FAEDKV and FOURIER), so the error is the policy's alone. */
  const size_t decode_values = (size_t)decode_steps * LAYERS * Q_ROW;
  float* full_outputs = malloc(decode_values * sizeof(float));
  float* full_unrotated = malloc(decode_values * sizeof(float));
  float* outputs = malloc(decode_values * sizeof(float));
  kvc_cache_stats unrotated_stats;
  const double unrotated_error = run_policy(reference, &policies[0], KVC_ROPE_NONE, decode_steps, full_unrotated, &unrotated_stats);
  printf("%-10s %12s %12s %18s %16s %14s %12s\n", "policy", "slots held", "compressions", "device bytes held", "bytes per token",
         "error vs FULL", "vs CPU ref");
  double worst = unrotated_error;
  for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); ++i) {
    kvc_cache_stats stats;
    const kvc_rope_style rope = rope_of(policies[i].policy);
    const double error = run_policy(reference, &policies[i], rope, decode_steps, i == 0 ? full_outputs : outputs, &stats);
    worst = fmax(worst, error);
    /* Bytes held per token streamed: what the policy costs against keeping everything; the
     * error of its decode outputs against FULL's: what that costs the model. */
    const float* full = rope == KVC_ROPE_NONE ? full_unrotated : full_outputs;
    const double error_vs_full = i == 0 ? 0.0 : relative_error(outputs, full, decode_values);
    printf("%-10s %12llu %12llu %18llu %16.1f %14.3g %12.2g\n", policies[i].name, (unsigned long long)stats.slots_held,
           (unsigned long long)stats.compressions, (unsigned long long)stats.device_bytes_held,
           (double)stats.device_bytes_held / (double)(stats.tokens_seen / LAYERS), error_vs_full, error);
  }
  printf("error vs FULL: ||out - out_FULL|| / ||out_FULL|| over the decode steps' attention outputs (1: as far off as zeros)\n");
  free(full_outputs), free(full_unrotated), free(outputs);
  printf("attention on %s vs the CPU reference: max error %.3g of the output scale (%s)\n", info.device_name, worst,
         worst < 1e-4 ? "agree" : "DISAGREE");
  kvc_context_destroy(device);
  kvc_context_destroy(reference);
  return worst < 1e-4 ? 0 : 1;
}
