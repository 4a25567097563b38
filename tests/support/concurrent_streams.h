// kvc.h's threading contract, tested: two contexts, each made and driven on its own thread at
// the same time, give what each gives when run alone. The streams' inputs are drawn before
// the threads start (the test generator is not thread-safe); the threads call only libkvc.
#pragma once

#include "kvc/kvc.h"

namespace kvc::test {

// Runs an H2O stream (f16, RoPE: scoring and eviction every step) and a FREQKV stream (f32:
// compression when the window fills) once alone and once each on its own thread at the same
// time, on fresh contexts of `backend`, and checks that every attention output and every
// layer's final contents are bitwise the same: a context shares nothing with another.
void check_two_contexts_in_two_threads(kvc_backend backend);

}  // namespace kvc::test
