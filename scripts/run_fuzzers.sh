#!/usr/bin/env bash
# Builds the `fuzz` preset (clang + libFuzzer + ASan/UBSan) and runs every fuzz target for SECONDS each.
# Usage: scripts/run_fuzzers.sh BUILD_DIR SECONDS
# A crash leaves its input in BUILD_DIR/crashes/ and makes this script exit non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/fuzz}
secs=${2:-60}
# Serialise concurrent callers (ctest -j) on one build dir.
exec 9>"${build}.lock"
flock 9
cmake --preset fuzz -B "$build" >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
mkdir -p "$build/crashes" "$build/corpus"
status=0
ran=0
for t in config_fuzz tokenizer_fuzz shard_fuzz safetensors_fuzz; do
  bin="$build/tests/fuzz/$t"
  [ -x "$bin" ] || continue
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
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
