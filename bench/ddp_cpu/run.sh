#!/usr/bin/env bash
# DDP on CPU, collective half: all-reduce GB/s of our ProcessGroup, of the Reducer's buckets and of raw
# Gloo on the same buffer, 2 processes on this machine, 1-256 MB (the binary forks both ranks).
# Usage: bench/ddp_cpu/run.sh [BUILD_DIR] [extra args, e.g. --sizes-mb 1,16 --iters 5]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
shift || true
cmake --build "$BUILD" --target ddp_allreduce_bench >/dev/null
echo "# $(uptime)"
"$BUILD/bench/ddp_cpu/ddp_allreduce_bench" "$@"
