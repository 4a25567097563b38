// kvc_faedkv_params_default: FAEDKV's sec. 5.1 settings (10 sinks, 50 recent tokens, 22
// chunks) and its middle compression ratio of Table 1 (0.125).
#include "kvc/kvc.h"

extern "C" kvc_faedkv_params kvc_faedkv_params_default(void) {
  kvc_faedkv_params params{};
  params.struct_size = sizeof(kvc_faedkv_params);
  params.sinks = 10;
  params.recent_window = 50;
  params.chunks = 22;
  params.retain_ratio = 0.125f;
  return params;
}
