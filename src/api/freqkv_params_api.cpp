// kvc_freqkv_params_default: FreqKV's section 4.1 settings (4 sinks, retaining ratio 0.5, and
// no recent window: the paper compresses everything after the sinks).
#include "kvc/kvc.h"

extern "C" kvc_freqkv_params kvc_freqkv_params_default(void) {
  kvc_freqkv_params params{};
  params.struct_size = sizeof(kvc_freqkv_params);
  params.sink_tokens = 4;
  params.retain_ratio = 0.5f;
  params.recent_tokens = 0;
  return params;
}
