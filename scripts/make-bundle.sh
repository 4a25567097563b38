#!/usr/bin/env bash
# Builds a portable folder (default: bundle/) that runs on any x86-64 Linux with glibc and a
# Vulkan driver: test binaries, kvc-demo, kvc-bench and kvc-soak with glslang, SPIRV-Tools, libstdc++
# and libgcc linked in (libvulkan.so.1 is loaded at run time), the peer script, and run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bundle}"
cmake -S . -B build-bundle -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVC_STATIC_RUNTIME=ON >/dev/null
cmake --build build-bundle
# The cooperative-matrix kernels are in only when a glslang >= 13 was found (scripts/install-deps.sh).
if grep -q '"attention_prefill_coopmat"' build-bundle/src/shaders/shader_registry.cpp; then
  coopmat="cooperative-matrix shaders embedded"
else
  coopmat="NO cooperative-matrix shaders (glslang >= 13 not found: run scripts/install-deps.sh first)"
fi
rm -rf "$out" && mkdir -p "$out/peers"
cp build-bundle/tests/kvc_tests_cpu build-bundle/tests/kvc_tests_vulkan build-bundle/samples/kvc-demo \
   build-bundle/bench/kvc-bench build-bundle/tests/soak/kvc-soak "$out/"
cp bench/peers/*.py "$out/peers/"
cp scripts/bundle-run.sh "$out/run.sh"
echo "bundle ready: $out/ ($(du -sh "$out" | cut -f1)), $coopmat; run: $out/run.sh tests|demo|bench|soak|peer [args]"
