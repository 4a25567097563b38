#include <string>

#include "policies/eviction.h"
#include "policies/faedkv.h"
#include "policies/fourier.h"
#include "policies/freqkv.h"
#include "policies/full.h"
#include "policies/observation_window.h"

namespace kvc {

std::unique_ptr<Policy> make_policy(const CacheConfig& config) {
  switch (config.policy) {
    case KVC_POLICY_FULL:
      require(config.policy_params == nullptr, KVC_ERROR_INVALID_ARGUMENT, "KVC_POLICY_FULL takes no policy_params");
      return std::make_unique<FullPolicy>(config);
    case KVC_POLICY_FREQKV:
      return std::make_unique<FreqKvPolicy>(config, freqkv_params(config));
    case KVC_POLICY_FAEDKV:
      return make_faedkv_policy(config);
    case KVC_POLICY_FOURIER:
      return make_fourier_policy(config);
    case KVC_POLICY_STREAMING:
    case KVC_POLICY_H2O:
    case KVC_POLICY_TOVA:
    case KVC_POLICY_TREEKV:
      return std::make_unique<EvictionPolicy>(config);
    case KVC_POLICY_SNAPKV:
    case KVC_POLICY_PYRAMIDKV:
    case KVC_POLICY_HITKV:
    case KVC_POLICY_PHITKV:
      return std::make_unique<WindowPolicy>(config, window_policy_config(config));
    default:
      break;
  }
  throw Error(KVC_ERROR_INVALID_ARGUMENT, "policy " + std::to_string(config.policy) + " is not a kvc_policy");
}

}  // namespace kvc
