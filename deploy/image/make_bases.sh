#!/usr/bin/env bash
# Builds the two local base images `make image` uses when no registry is reachable, from Debian 12
# packages: debootstrap a minbase bookworm rootfs with the build (or runtime) packages already
# installed, trim it the way debian:bookworm-slim is trimmed, and `podman import` it. Cached: an
# image that already exists with the same package list (label llmtrain.packages) is not rebuilt.
# Needs root (debootstrap, chroot). Usage: deploy/image/make_bases.sh [build|runtime|all]
set -euo pipefail
cd "$(dirname "$0")/../.."

MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${LLMT_IMAGE_CACHE:-.cache/image}
PODMAN=(podman --runtime runc)

# Keep these lists in step with the apt-get lines of deploy/Containerfile (the registry path).
# ocl-icd-opencl-dev: oneDNN's CMake package (dnnl-config.cmake) requires OpenCL headers and library.
BUILD_PKGS="ca-certificates ccache cmake ninja-build g++ make pkg-config libyaml-cpp-dev nlohmann-json3-dev"
BUILD_PKGS+=" libcli11-dev libfmt-dev libopenblas-dev ocl-icd-opencl-dev libdnnl-dev libgloo-dev libcpp-httplib-dev"
BUILD_PKGS+=" libsqlite3-dev libcurl4-openssl-dev zlib1g-dev"
RUNTIME_PKGS="ca-certificates libyaml-cpp0.7 libfmt9 libopenblas0-pthread libdnnl2 libgomp1 zlib1g libgloo0"
RUNTIME_PKGS+=" libcpp-httplib0.11 libsqlite3-0 libcurl4 tar dataset-fashion-mnist"

make_base() {
  local name=$1 pkgs=$2
  local tag="localhost/llmtrain-${name}-base:bookworm"
  local want label='{{index .Config.Labels "llmtrain.packages"}}'
  want=$(echo "$pkgs" | tr ' ' '\n' | sort | tr '\n' ' ' | sha256sum | cut -c1-16)
  if "${PODMAN[@]}" image exists "$tag" &&
     [ "$("${PODMAN[@]}" image inspect --format "$label" "$tag")" = "$want" ]; then
    echo "make_bases.sh: $tag is up to date" >&2
    return
  fi
  local root="$CACHE/rootfs-$name"
  rm -rf "$root"
  mkdir -p "$CACHE/debs"
  echo "make_bases.sh: debootstrap $name rootfs ($pkgs)" >&2
  debootstrap --variant=minbase --cache-dir="$(realpath "$CACHE/debs")" \
    --include="$(echo "$pkgs" | tr ' ' ',')" bookworm "$root" "$MIRROR" >"$CACHE/debootstrap-$name.log" 2>&1 ||
    { tail -20 "$CACHE/debootstrap-$name.log" >&2; exit 1; }
  # What debian:bookworm-slim drops: docs, man pages, locales other than C, apt lists and caches.
  rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
    "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/var/log/*.log
  find "$root"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null || true
  tar -C "$root" -c . | "${PODMAN[@]}" import \
    --change "LABEL llmtrain.packages=$want" --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null
  rm -rf "$root"
  echo "make_bases.sh: imported $tag" >&2
}

case "${1:-all}" in
  build) make_base build "$BUILD_PKGS" ;;
  runtime) make_base runtime "$RUNTIME_PKGS" ;;
  all) make_base runtime "$RUNTIME_PKGS"; make_base build "$BUILD_PKGS" ;;
  *) echo "usage: $0 [build|runtime|all]" >&2; exit 2 ;;
esac
