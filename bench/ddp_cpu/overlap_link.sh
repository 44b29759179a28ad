#!/usr/bin/env bash
# DDP overlap where communication matters (issue 5): two "hosts" (network namespaces, one rank x 1 thread
# each) joined by a link shaped to RATE (tc tbf on each host's interface, as a NIC of that speed), so the
# gradient all-reduce waits on the wire rather than on the CPU. Step time with the all-reduce overlapped
# with backward (dist.overlap: true) vs after backward (false), same global batch, same everything else.
# On this 2-core machine each rank has a core and Gloo's sends mostly wait on the link, which is the
# situation overlap is for (on an unshaped veth the transfer is a memcpy that competes for the cores).
# Two models: `tiny` (GPT-2 vocabulary, tied embeddings: 51 of its 64 MB of gradients are the token
# embedding, which is final only when backward ends, so there is little to overlap — as in torch DDP) and
# `layers` (vocabulary 4096, 8 layers of d=512: 97 of 108 MB are layer gradients that become final layer
# by layer during backward).
# Usage: bench/ddp_cpu/overlap_link.sh [BUILD_DIR] [STEPS] [RATE]   (root; tests/support/netns_hosts.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
STEPS=${2:-8}
RATE=${3:-1gbit}
BIN=$(realpath "$BUILD/llmtrain")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/v50257" "$work/v4096"
/usr/bin/python3 bench/random_shard.py "$work/v50257/train_000000.bin" 50257
/usr/bin/python3 bench/random_shard.py "$work/v4096/train_000000.bin" 4096

# run NAME N_LAYER D_MODEL N_HEAD OVERLAP VOCAB -> "median tok/s median ms"
run() {
  local cfg="$work/$1.yaml"
  local launch="$BIN launch --nnodes 2 --node-rank \$NETNS_HOST_INDEX --nproc-per-node 1 --master-addr host-0"
  launch+=" --master-port 29511 -- train --config $cfg"
  cat >"$cfg" <<YAML
run: {name: bench, seed: 1, device: cpu, threads: 1}
model: {n_layer: $2, n_head: $4, d_model: $3, block_size: 256, vocab_size: $6}
trainer: {max_steps: $STEPS, micro_batch_size: 8, warmup_steps: 1, log_every_steps: 1, eval_every_steps: 0,
          save_every_steps: 0}
dist: {overlap: $5, timeout_sec: 120}
data: {train_shards: $work/v$6/train_*.bin}
output: {root_dir: $work/runs, run_id: $1}
YAML
  bash tests/support/netns_hosts.sh -n 2 -r "$RATE" -t 600 -- \
    "$launch" \
    >"$work/$1.log" 2>&1 || { tail -20 "$work/$1.log" >&2; exit 1; }
  /usr/bin/python3 - "$work/runs/$1/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][2:]  # steps 3.. (warm-up)
print(f"{statistics.median(r['tokens_per_sec'] for r in rows):.0f} {statistics.median(r['ms'] for r in rows):.0f}")
PY
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
  "load: $(cut -d' ' -f1-3 /proc/loadavg); link: $RATE"
printf '%-6s %-14s %10s %10s\n' config all-reduce "tok/s" "ms/step"
for c in "tiny 4 256 4 50257" "layers 8 512 8 4096"; do
  set -- $c
  read -r t1 m1 < <(run "$1-overlap" "$2" "$3" "$4" true "$5")
  read -r t2 m2 < <(run "$1-after" "$2" "$3" "$4" false "$5")
  printf '%-6s %-14s %10s %10s\n' "$1" "overlapped" "$t1" "$m1"
  printf '%-6s %-14s %10s %10s\n' "$1" "after backward" "$t2" "$m2"
  echo "$1: overlap saves $(/usr/bin/python3 -c "print(f'{$m2-$m1:.0f} ms ({($m2-$m1)/$m2*100:.0f}%)')") per step"
done
