#include "vulkan/validation_log.h"

#include <mutex>

namespace kvc::vk {
namespace {

struct ValidationLog {
  std::mutex mutex;
  uint64_t count = 0;
  std::vector<std::string> first;
};

// Never destroyed: a Device destroyed during static destruction (a test's shared backend) may
// still report.
ValidationLog& log() {
  static ValidationLog* instance = new ValidationLog();
  return *instance;
}

}  // namespace

void record_validation_message(const char* text) {
  ValidationLog& state = log();
  std::lock_guard<std::mutex> lock(state.mutex);
  ++state.count;
  if (state.first.size() < kKeptValidationMessages) state.first.emplace_back(text ? text : "");
}

uint64_t validation_messages_in_process() {
  ValidationLog& state = log();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.count;
}

std::vector<std::string> first_validation_messages() {
  ValidationLog& state = log();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.first;
}

}  // namespace kvc::vk
