#!/usr/bin/env bash
# The Makefile's configure step: a configure that failed or was killed after CMake wrote CMakeCache.txt
# but before it generated build.ninja must be run again by the next `make build`, not taken as done
# (the old rule keyed on CMakeCache.txt and ninja then stopped with "loading 'build.ninja': No such
# file"). Runs the repository's Makefile on a one-file CMake project with the same preset name.
set -euo pipefail
MAKEFILE=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cp "$MAKEFILE" Makefile
cat >CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.25)
project(configure_probe CXX)
option(LLMTRAIN_WERROR "" OFF)
if(FAIL_CONFIGURE)
  message(FATAL_ERROR "configure failed on purpose")
endif()
add_executable(llmtrain main.cpp)
CM
echo 'int main() { return 0; }' >main.cpp
cat >CMakePresets.json <<'CM'
{"version": 6,
 "configurePresets": [{"name": "release", "generator": "Ninja", "binaryDir": "${sourceDir}/build/release"}],
 "buildPresets": [{"name": "release", "configurePreset": "release"}]}
CM

# 1. A configure that fails leaves CMakeCache.txt and no build.ninja.
if cmake --preset release -DFAIL_CONFIGURE=ON >/dev/null 2>&1; then
  echo "FAIL: the failing configure succeeded"; exit 1
fi
[ -f build/release/CMakeCache.txt ] && [ ! -f build/release/build.ninja ] \
  || { echo "FAIL: expected a cache without build.ninja"; exit 1; }
sed -i 's/^FAIL_CONFIGURE:[A-Z]*=ON/FAIL_CONFIGURE:BOOL=OFF/' build/release/CMakeCache.txt  # the cause is fixed
# 2. The next make configures again and builds.
make --no-print-directory build >make.log 2>&1 \
  || { cat make.log; echo "FAIL: make build after a failed configure"; exit 1; }
[ -x build/release/llmtrain ] || { cat make.log; echo "FAIL: nothing was built"; exit 1; }
# 3. A later make does not configure again.
make --no-print-directory build >make2.log 2>&1
if grep -q 'cmake --preset' make2.log; then
  cat make2.log; echo "FAIL: configured again although build.ninja exists"; exit 1
fi
echo "ok: a failed configure is retried by the next make"
