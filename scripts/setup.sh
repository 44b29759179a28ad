#!/usr/bin/env bash
# Installs what llmtrain needs to build, test and run on Debian 12. Idempotent: apt-get runs only
# for packages that are missing; npm fetches only what is not cached. Needs root or sudo.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "setup.sh: needs root or sudo to install packages" >&2; exit 1; }
  SUDO="sudo"
fi

# Build, libraries (docs/architecture.md says why each), reference numerics, default corpus, tools.
PACKAGES=(
  cmake ninja-build g++ clang make pkg-config git ca-certificates
  libfuzzer-14-dev libclang-rt-14-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libopenblas-dev libdnnl-dev libgloo-dev libcpp-httplib-dev libsqlite3-dev libcurl4-openssl-dev
  # dnnl-config.cmake find_package()s OpenCL (Debian's oneDNN is built with its OpenCL runtime), but
  # libdnnl-dev only Recommends the package and we install with --no-install-recommends.
  ocl-icd-opencl-dev
  libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
  libsnappy-dev libzstd-dev  # Parquet page codecs (snappy, zstd; gzip is zlib's)
  python3 python3-torch python3-numpy
  python3-protobuf python3-yaml  # the tracking tests' independent TensorBoard and MLflow readers
  python3-botocore  # AWS's SigV4 signer, the object-storage tests' second opinion on ours
  unicode-data
  bible-kjv bible-kjv-text fortunes fortunes-min
  dataset-fashion-mnist  # data.source idx default: /usr/share/datasets/fashion-mnist (docs/classifier.md)
  iproute2 procps
  podman buildah runc debootstrap
  chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node.js/npm come from another source on these machines; install Debian's only where node is missing
# (Debian's npm conflicts with an installed Node.js).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi

# Steps added by later layers (tokenizer ranks, web assets) live in their own scripts.
for step in scripts/setup.d/*.sh; do
  [ -e "$step" ] || continue
  bash "$step"
done
echo "setup.sh: ok" >&2
