#include "soak/process_memory.h"

#include <unistd.h>

#include <fstream>

namespace kvc::soak {

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t total_pages = 0, resident_pages = 0;
  if (!(statm >> total_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace kvc::soak
