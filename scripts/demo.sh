#!/usr/bin/env bash
# README command 1: installs the dependencies, builds, and runs the demo on the default device
# (a GPU if there is one, else Mesa's lavapipe, else the CPU backend).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
./build/samples/kvc-demo "$@"
