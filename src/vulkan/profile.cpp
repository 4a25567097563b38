#include "vulkan/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace kvc::vk {
namespace {

struct CommandTime {
  uint64_t calls = 0;
  double ns = 0.0;
};

std::mutex table_mutex;
std::map<std::string, CommandTime> table;

}  // namespace

bool profiling_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("KVC_PROFILE");
    return value && std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

void profile_add(const std::string& command, double ns) {
  const std::lock_guard<std::mutex> lock(table_mutex);
  CommandTime& entry = table[command];
  ++entry.calls;
  entry.ns += ns;
}

std::string profile_take(const std::string& title) {
  std::vector<std::pair<std::string, CommandTime>> entries;
  {
    const std::lock_guard<std::mutex> lock(table_mutex);
    entries.assign(table.begin(), table.end());
    table.clear();
  }
  if (entries.empty()) return {};
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  double total_ns = 0.0;
  for (const auto& entry : entries) total_ns += entry.second.ns;
  std::string text = "kvc profile: " + title + "\n";
  char line[160];
  for (const auto& [command, time] : entries) {
    std::snprintf(line, sizeof(line), "  %-34s %9llu calls %11.3f ms %5.1f%% %11.2f us/call\n", command.c_str(),
                  static_cast<unsigned long long>(time.calls), time.ns * 1e-6, 100.0 * time.ns / total_ns,
                  time.ns * 1e-3 / double(time.calls));
    text += line;
  }
  return text;
}

}  // namespace kvc::vk
