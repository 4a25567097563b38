#!/usr/bin/env bash
# libkvc's portable bundle: run.sh tests | demo [tokens] | bench [kvc-bench args] | soak [kvc-soak args] | peer [args]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then
  cat >&2 <<'MSG'
run.sh: no Vulkan loader (libvulkan.so.1) on this machine. The tests and the demo still run on
the CPU backend where they can; for the GPU: install your distribution's Vulkan loader
(Debian/Ubuntu: libvulkan1), or, on a machine with an NVIDIA driver but no packages, extract the
Debian packages libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 with `dpkg -x`
into /, run ldconfig, and set
VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json if no driver is found
(without libglvnd the NVIDIA driver fails to load and vkCreateInstance returns -9).
MSG
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then export VK_DRIVER_FILES="$nvidia_icd"; fi

what="${1:-tests}"
shift || true
case "$what" in
  tests) "$here/kvc_tests_cpu" "$@" && "$here/kvc_tests_vulkan" "$@" ;;
  demo) "$here/kvc-demo" "$@" ;;
  bench) "$here/kvc-bench" "$@" ;;
  soak) "$here/kvc-soak" "$@" ;;
  peer) python3 "$here/peers/peer_bench.py" "$@" ;;
  *) echo "usage: run.sh tests|demo|bench|soak|peer [args]" >&2; exit 2 ;;
esac
