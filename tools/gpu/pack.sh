#!/usr/bin/env bash
# Packs built binaries plus the shared libraries they need that a non-Debian GPU machine lacks into one
# folder (default build/gpu-carry) for the device tool's `carry`: everything ldd resolves outside the
# C runtime and the CUDA driver/toolkit (those exist there) is copied beside the binaries; run them with
# LD_LIBRARY_PATH=<folder>/lib. The CPU GEMM libraries (OpenBLAS, oneDNN) are dlopen'ed on first use
# (core/lazy_library.h), so ldd does not list them: they are packed by soname, with what they link.
# OUTDIR.tgz holds the same, gzipped (oneDNN + OpenBLAS are ~75 MB raw, over the 64 MiB a call may carry).
# Usage: tools/gpu/pack.sh OUTDIR BINARY...
set -euo pipefail
out=$1
shift
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
# Copies the libraries $1 links (per ldd), except those the GPU machine has.
copy_deps() {
  ldd "$1" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libstdc++.so*|libgcc_s.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*) ;;
      libcuda.so*|libcublas*|libcudart*|libcudnn*|libnccl*) ;;
      *) cp -L -n "$lib" "$out/lib/" ;;
    esac
  done
}
for bin in "$@"; do
  cp "$bin" "$out/bin/"
  strip --strip-debug "$out/bin/$(basename "$bin")" || true
  copy_deps "$bin"
done
# The sonames src/kernels/cpu/gemm_libs.cpp dlopens (keep in step with it).
for so in libopenblas.so.0 libdnnl.so.2; do
  lib=$(ldconfig -p | awk -v s="$so" '$1 == s && /x86-64/ && !f {print $NF; f = 1}')  # no early exit: pipefail
  [ -n "$lib" ] || continue
  cp -L -n "$lib" "$out/lib/$so"
  copy_deps "$lib"
done
tar czf "$out.tgz" -C "$out" bin lib
du -sh "$out" "$out.tgz"
