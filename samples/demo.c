/* libkvc demo: streams a few thousand random tokens through a small model-shaped cache on the
 * default device (a GPU, lavapipe, or the CPU when no Vulkan exists), and checks every
 * attention output against the CPU reference fed the same tokens.
 *
 *   kvc-demo [tokens]      (default 3000: a 1000-token prefill in 4 chunks, then decode steps)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kvc/kvc.h>

enum { LAYERS = 4, Q_HEADS = 8, KV_HEADS = 2, HEAD_DIM = 64, PREFILL = 1000, CHUNK = 250 };

#define CHECK_OK(call)                                                                  \
  do {                                                                                  \
    kvc_status status_ = (call);                                                        \
    if (status_ != KVC_OK) {                                                            \
      fprintf(stderr, "%s failed: %s\n", #call, kvc_status_name(status_));              \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

static float random_unit(uint64_t* state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*state >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static void fill(float* data, size_t count, uint64_t* state) {
  for (size_t i = 0; i < count; ++i) data[i] = random_unit(state);
}

int main(int argc, char** argv) {
  const uint32_t tokens = argc > 1 ? (uint32_t)atoi(argv[1]) : 3000;
  if (tokens <= PREFILL) {
    fprintf(stderr, "usage: kvc-demo [tokens > %d]\n", PREFILL);
    return 2;
  }
  kvc_context_desc context_desc = kvc_context_desc_default();
  kvc_context *device = NULL, *reference = NULL;
  if (kvc_context_create(&context_desc, &device) != KVC_OK) {
    fprintf(stderr, "no context: %s\n", kvc_last_create_error());
    return 1;
  }
  context_desc.backend = KVC_BACKEND_CPU;
  CHECK_OK(kvc_context_create(&context_desc, &reference));
  kvc_context_info info = {sizeof(kvc_context_info)};
  CHECK_OK(kvc_context_info_get(device, &info));
  printf("libkvc %s on %s (%s)\n", kvc_version_string(), info.device_name,
         info.backend == KVC_BACKEND_VULKAN ? "Vulkan" : "CPU backend");

  kvc_cache_desc desc = kvc_cache_desc_default();
  desc.num_layers = LAYERS;
  desc.num_q_heads = Q_HEADS;
  desc.num_kv_heads = KV_HEADS;
  desc.head_dim = HEAD_DIM;
  desc.dtype = KVC_DTYPE_F32;
  desc.capacity = tokens;
  desc.policy = KVC_POLICY_FULL;
  desc.rope_style = KVC_ROPE_NEOX;
  kvc_cache *cache = NULL, *reference_cache = NULL;
  CHECK_OK(kvc_cache_create(device, &desc, &cache));
  CHECK_OK(kvc_cache_create(reference, &desc, &reference_cache));

  const size_t kv_elements = (size_t)CHUNK * KV_HEADS * HEAD_DIM, q_elements = (size_t)CHUNK * Q_HEADS * HEAD_DIM;
  float* k = malloc(kv_elements * sizeof(float));
  float* v = malloc(kv_elements * sizeof(float));
  float* q = malloc(q_elements * sizeof(float));
  float* out = malloc(q_elements * sizeof(float));
  float* expected = malloc(q_elements * sizeof(float));
  uint64_t state = 42;
  double worst = 0.0;
  for (uint32_t done = 0; done < tokens;) {
    const uint32_t n = done < PREFILL ? CHUNK : 1;  /* prefill chunks, then one token a step */
    for (uint32_t layer = 0; layer < LAYERS; ++layer) {
      fill(k, (size_t)n * KV_HEADS * HEAD_DIM, &state);
      fill(v, (size_t)n * KV_HEADS * HEAD_DIM, &state);
      fill(q, (size_t)n * Q_HEADS * HEAD_DIM, &state);
      CHECK_OK(kvc_cache_append(cache, layer, n, KVC_DTYPE_F32, k, v));
      CHECK_OK(kvc_attend(cache, layer, n, KVC_DTYPE_F32, q, out, NULL));
      /* The reference checks every prefill chunk and every 100th decode step (it is slow). */
      CHECK_OK(kvc_cache_append(reference_cache, layer, n, KVC_DTYPE_F32, k, v));
      if (n > 1 || done % 100 == 0) {
        CHECK_OK(kvc_attend(reference_cache, layer, n, KVC_DTYPE_F32, q, expected, NULL));
        double max_error = 0.0, scale = 0.0;
        for (size_t i = 0; i < (size_t)n * Q_HEADS * HEAD_DIM; ++i) {
          max_error = fmax(max_error, fabs((double)out[i] - expected[i]));
          scale = fmax(scale, fabs((double)expected[i]));
        }
        worst = fmax(worst, max_error / scale);
      }
    }
    done += n;
  }
  kvc_cache_stats stats = {sizeof(kvc_cache_stats)};
  CHECK_OK(kvc_cache_stats_get(cache, &stats));
  printf("policy FULL: %u layers x %u kv heads x head_dim %u, %llu tokens streamed\n", LAYERS, KV_HEADS, HEAD_DIM,
         (unsigned long long)(stats.tokens_seen / LAYERS));
  printf("slots held %llu, device bytes held %llu (%llu bytes per slot per layer)\n",
         (unsigned long long)stats.slots_held, (unsigned long long)stats.device_bytes_held,
         (unsigned long long)stats.bytes_per_slot);
  printf("attention vs CPU reference: max error %.3g of the output scale (%s)\n", worst, worst < 1e-5 ? "agree" : "DISAGREE");
  free(k), free(v), free(q), free(out), free(expected);
  kvc_cache_destroy(cache);
  kvc_cache_destroy(reference_cache);
  kvc_context_destroy(device);
  kvc_context_destroy(reference);
  return worst < 1e-5 ? 0 : 1;
}
