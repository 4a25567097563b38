#!/usr/bin/env bash
# Builds the API fuzzer (fuzz/, clang with libFuzzer, ASan and UBSan) into build-fuzz/ and runs
# it from the seeds in fuzz/corpus/: `scripts/fuzz.sh [seconds]` fuzzes the CPU backend for
# that long (default 120), then, when a Vulkan device (lavapipe in CI) is there, the Vulkan
# backend for KVC_FUZZ_VULKAN_SECONDS (default 20), under the validation layer (a message is a
# finding). Any finding fails the script; libFuzzer
# saves its input under build-fuzz/findings/ (replay: build-fuzz/fuzz/kvc_api_fuzzer FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-120}"
vulkan_seconds="${KVC_FUZZ_VULKAN_SECONDS:-20}"
scripts/install-deps.sh fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVC_FUZZ=ON \
  -DKVC_BUILD_TESTS=OFF -DKVC_BUILD_SAMPLES=OFF >/dev/null
cmake --build build-fuzz --target kvc_api_fuzzer
rm -rf build-fuzz/findings
mkdir -p build-fuzz/corpus-cpu build-fuzz/corpus-vulkan build-fuzz/findings
# New inputs go to a working corpus per backend in the build tree; the committed seeds stay.
fuzz() {  # seconds, backend, more libFuzzer options and corpus directories
  local status=0
  KVC_FUZZ_BACKEND="$2" build-fuzz/fuzz/kvc_api_fuzzer "build-fuzz/corpus-$2" "${@:3}" -max_total_time="$1" \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=build-fuzz/findings/ >build-fuzz/fuzz.log 2>&1 || status=$?
  grep -v '^#[0-9]\|^"\|dictionary\|NEW_FUNC' build-fuzz/fuzz.log | tail -40  # the summary, or the finding's report
  [ "$status" -eq 0 ] || { echo "fuzz: a finding (exit $status); its input is in build-fuzz/findings/" >&2; exit 1; }
}
echo "== fuzzing the CPU backend for ${seconds} s"
fuzz "$seconds" cpu fuzz/corpus -timeout=20
if vulkaninfo --summary >/dev/null 2>&1; then
  echo "== fuzzing the Vulkan backend for ${vulkan_seconds} s"
  # Under ASan one of the seeds' long sequences takes lavapipe about 20 s, so the Vulkan run
  # starts from nothing and keeps inputs short (a few calls each). Mesa's llvmpipe leaks a few
  # bytes per instance in a module it unloads, which LeakSanitizer would report: libkvc's
  # leaks are checked on the CPU backend. KVC_VALIDATION=1: every input's context validates.
  KVC_VALIDATION=1 ASAN_OPTIONS=detect_leaks=0 fuzz "$vulkan_seconds" vulkan -max_len=48 -timeout=120 -detect_leaks=0
else
  echo "== no Vulkan device: the Vulkan backend is not fuzzed"
fi
