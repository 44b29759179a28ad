#!/usr/bin/env bash
# Builds the `fuzz` preset (clang + libFuzzer + ASan/UBSan) and runs every fuzz target for SECONDS each.
# Usage: scripts/run_fuzzers.sh BUILD_DIR SECONDS [TARGET...]
# Runs every *_fuzz binary the preset built (tests/fuzz/CMakeLists.txt lists them), or the named ones.
# Seeds: tests/fuzz/corpus/<target without _fuzz>/ when present (config_fuzz also gets the presets).
# A crash leaves its input in BUILD_DIR/crashes/ and makes this script exit non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/fuzz}
secs=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
# Serialise concurrent callers (ctest -j) on one build dir.
exec 9>"${build}.lock"
flock 9
cmake --preset fuzz -B "$build" >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
mkdir -p "$build/crashes" "$build/corpus"
status=0
ran=0
if [ $# -gt 0 ]; then targets=("$@"); else
  targets=()
  for bin in "$build"/tests/fuzz/*_fuzz; do [ -x "$bin" ] && targets+=("$(basename "$bin")"); done
fi
for t in "${targets[@]}"; do
  bin="$build/tests/fuzz/$t"
  [ -x "$bin" ] || { echo "fuzz: $t was not built" >&2; status=1; continue; }
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  seeds="tests/fuzz/corpus/${t%_fuzz}"
  [ -d "$seeds" ] && cp -n "$seeds"/* "$corpus/" 2>/dev/null || true
  case $t in
    config_fuzz) cp -n configs/presets/*.yaml "$corpus/" 2>/dev/null || true ;;
  esac
  echo "fuzz: $t for ${secs}s" >&2
  if ! "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
       -artifact_prefix="$build/crashes/$t-" "$corpus" >"$build/$t.log" 2>&1; then
    echo "fuzz: $t FAILED; see $build/$t.log and $build/crashes/" >&2
    tail -40 "$build/$t.log" >&2
    status=1
  else
    grep -E "^Done|stat::number_of_executed_units" "$build/$t.log" | tail -1 >&2 || true
  fi
  ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || { echo "fuzz: no fuzz targets were built" >&2; exit 1; }
exit $status
