#include <string>

#include "policies/freqkv.h"
#include "policies/full.h"

namespace kvc {

std::unique_ptr<Policy> make_policy(const CacheConfig& config) {
  switch (config.policy) {
    case KVC_POLICY_FULL:
      require(config.policy_params == nullptr, KVC_ERROR_INVALID_ARGUMENT, "KVC_POLICY_FULL takes no policy_params");
      return std::make_unique<FullPolicy>(config);
    case KVC_POLICY_FREQKV:
      return std::make_unique<FreqKvPolicy>(config, freqkv_params(config));
  }
  throw Error(KVC_ERROR_INVALID_ARGUMENT, "policy " + std::to_string(config.policy) + " is not a kvc_policy");
}

}  // namespace kvc
