// One error type for the whole library: internal code throws kvc::Error with a status and a
// message that names the argument and the limit; the C boundary (src/api) turns it into a
// kvc_status and the context's last-error text.
#pragma once

#include <stdexcept>
#include <string>

#include "kvc/kvc.h"

namespace kvc {

class Error : public std::runtime_error {
 public:
  Error(kvc_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  kvc_status status() const { return status_; }

 private:
  kvc_status status_;
};

// Throws Error(status, message) unless `condition` holds.
inline void require(bool condition, kvc_status status, const std::string& message) {
  if (!condition) throw Error(status, message);
}

}  // namespace kvc
