#!/usr/bin/env bash
# Installs what cumembench needs from Debian's packages (as root), or says
# exactly what to install. The CUDA toolkit (nvcc, cudart, cuBLAS, CCCL) is
# expected at /usr/local/cuda or on PATH; it does not come from Debian.
#
#   ci/install-deps.sh          what building, benchmarking and reports need
#   ci/install-deps.sh --test   and what the tests need too (chromium renders
#                               the HTML report headless)
set -euo pipefail

# The clang Debian installs as "clang" (14 on Debian 12), for its runtime package.
clang_major() {
  local v
  v=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
  [ -z "$v" ] && v=$(apt-cache depends clang 2>/dev/null | sed -n 's/.*Depends: clang-\([0-9]*\)$/\1/p' | head -1)
  echo "${v:-14}"
}

packages=(cmake make g++ pkg-config git libbenchmark-dev libbenchmark-tools libcmocka-dev libjansson-dev
          gnuplot-nox python3-matplotlib python3-markdown python3-scipy)
test_packages=(chromium)
case "${1:-}" in
--test) packages+=("${test_packages[@]}") ;;
"") ;;
*) echo "usage: ci/install-deps.sh [--test]" >&2; exit 2 ;;
esac
[ -n "${CMB_EXTRA_PACKAGES:-}" ] && packages+=(${CMB_EXTRA_PACKAGES})
# CMB_TEST_DEPS=1: what the reliability checks of .ci/run add: clang and its
# runtime (libFuzzer, sanitizers) for tests/fuzz/run.sh
[ "${CMB_TEST_DEPS:-0}" = 1 ] && packages+=(clang "libclang-rt-$(clang_major)-dev")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "cumembench: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
  else
    echo "cumembench: missing packages; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "cumembench: the CUDA toolkit (nvcc) is needed: install CUDA 12 or 13 to /usr/local/cuda" >&2
  exit 1
fi
