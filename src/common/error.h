// One error type for the whole library: internal code throws kvc::Error with a status and a
// message that names the argument and the limit; the C boundary (src/api) turns it into a
// kvc_status and the context's last-error text.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

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

// The same for a fixed text: no std::string is made unless the check fails (the checks run on
// every dispatch, and most texts are longer than a short string's inline buffer).
inline void require(bool condition, kvc_status status, const char* message) {
  if (!condition) throw Error(status, message);
}

// The same for checks on every append and attend: `make_message` builds the text only when
// the check fails (building it every time cost more than the check).
template <typename MakeMessage, typename = decltype(std::declval<MakeMessage&>()())>
inline void require(bool condition, kvc_status status, MakeMessage&& make_message) {
  if (!condition) throw Error(status, make_message());
}

}  // namespace kvc
