/* Links the installed libkvc and runs one decode step on the CPU backend. */
#include <stdio.h>

#include <kvc/kvc.h>

int main(void) {
  kvc_context_desc context_desc = kvc_context_desc_default();
  context_desc.backend = KVC_BACKEND_CPU;
  kvc_context* context = NULL;
  if (kvc_context_create(&context_desc, &context) != KVC_OK) return 1;
  kvc_cache_desc desc = kvc_cache_desc_default();
  desc.num_layers = 1;
  desc.num_q_heads = 2;
  desc.num_kv_heads = 1;
  desc.head_dim = 8;
  desc.capacity = 4;
  kvc_cache* cache = NULL;
  if (kvc_cache_create(context, &desc, &cache) != KVC_OK) return 1;
  float kv[8] = {1, 2, 3, 4, 5, 6, 7, 8}, q[16] = {0}, out[16];
  if (kvc_cache_append(cache, 0, 1, KVC_DTYPE_F32, kv, kv) != KVC_OK) return 1;
  if (kvc_attend(cache, 0, 1, KVC_DTYPE_F32, q, out, NULL) != KVC_OK) return 1;
  printf("libkvc %s linked; attention of one slot returns its value: %g\n", kvc_version_string(), out[7]);
  kvc_cache_destroy(cache);
  kvc_context_destroy(context);
  return out[7] == 8.0f ? 0 : 1;
}
