#!/usr/bin/env bash
# README command 2: builds and runs every test with ctest. The Vulkan tests run on the default
# device (lavapipe in CI); without one they are reported as skipped, unless KVC_REQUIRE_GPU=1.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure "$@"
