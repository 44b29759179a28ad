#!/usr/bin/env bash
# Starts `llmtrain serve` with a zero-capacity queue on a free loopback port in a temp dir, runs
# server_load (1,000 submissions from 16 clients by default; GETS GETs per submission, 0 by default),
# checks the store, stops the server. Prints the CPU model, core count and load average first.
# Usage: bench/server_load/run.sh BUILD_DIR [N] [CLIENTS] [GETS]
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [N] [CLIENTS] [GETS]}
n=${2:-1000}
clients=${3:-16}
gets=${4:-0}
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$tmp"' EXIT
token=load-token-0123456789abcdef
echo "$token loader submitter" > "$tmp/tokens"
"$build/llmtrain" serve --listen 127.0.0.1:0 --port-file "$tmp/port" --data-dir "$tmp/data" \
  --tokens-file "$tmp/tokens" --capacity cpus=0,gpus=0 --presets-dir "$src/configs/presets" 2> "$tmp/serve.log" &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cut -d: -f2 < "$tmp/port")
echo "cpu: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2- | sed "s/^ *//"), $(nproc) cores"
echo "load: $(uptime)"
"$build/bench/server_load/server_load" --port "$port" --token "$token" --n "$n" --clients "$clients" --gets "$gets" \
  --db "$tmp/data/jobs.sqlite"
