#!/usr/bin/env bash
# Installs what libkvc builds and tests with, from Debian 12 packages (root or sudo).
# `scripts/install-deps.sh fuzz` also installs clang and its sanitizer runtimes (libFuzzer
# included) for scripts/fuzz.sh.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config
  libvulkan-dev libvulkan-volk-dev glslang-dev glslang-tools spirv-tools libvkfft-dev doctest-dev
  mesa-vulkan-drivers vulkan-validationlayers vulkan-tools)
if [ "${1:-}" = fuzz ]; then packages+=(clang-14 libclang-rt-14-dev); fi
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
