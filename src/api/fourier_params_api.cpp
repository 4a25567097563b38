// kvc_fourier_params_default: FourierAttention's sec. 4.1 settings (4 initial tokens, 1024
// local tokens, N = 512 states), T the cache's capacity, the inverted pyramid, dims by error.
#include "kvc/kvc.h"

extern "C" kvc_fourier_params kvc_fourier_params_default(void) {
  kvc_fourier_params params{};
  params.struct_size = sizeof(kvc_fourier_params);
  params.sinks = 4;
  params.local_window = 1024;
  params.num_states = 512;
  return params;
}
