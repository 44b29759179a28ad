#!/usr/bin/env bash
# DDP on CPU, training half (issue 5): tokens/s of 1 process x 2 threads vs 2 processes x 1 thread
# (llmtrain launch --standalone, Gloo over loopback), and the 2-process step time with the gradient
# all-reduce overlapped with backward (dist.overlap: true, the default) vs done after backward.
# Same global batch everywhere (16 rows of T=256), fp32, random token ids, GPT-2 shapes:
#   tiny  = 4 layers, d=256 (16M parameters, 64 MB of gradients)
#   small = 6 layers, d=384 (30M parameters, 120 MB of gradients)
# Usage: bench/ddp_cpu/train.sh [BUILD_DIR] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
STEPS=${2:-10}
BIN=$BUILD/llmtrain
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 bench/random_shard.py "$work/train_000000.bin"

# run NAME N_LAYER D_MODEL N_HEAD NPROC THREADS OVERLAP -> "median tok/s median ms"
run() {
  local name=$1 cfg="$work/$1.yaml" rows=$((16 / $5))
  cat >"$cfg" <<YAML
run: {name: bench, seed: 1, device: cpu, threads: $6}
model: {n_layer: $2, n_head: $4, d_model: $3, block_size: 256, vocab_size: 50257}
trainer: {max_steps: $STEPS, micro_batch_size: $rows, warmup_steps: 1, log_every_steps: 1, eval_every_steps: 0,
          save_every_steps: 0}
dist: {overlap: $7}
data: {train_shards: $work/train_*.bin}
output: {root_dir: $work/runs, run_id: $name}
YAML
  if [ "$5" = 1 ]; then
    "$BIN" train --config "$cfg" >/dev/null 2>"$work/$name.log"
  else
    "$BIN" launch --standalone --nproc-per-node "$5" -- train --config "$cfg" >/dev/null 2>"$work/$name.log"
  fi
  /usr/bin/python3 - "$work/runs/$name/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][2:]  # steps 3.. (warm-up)
print(f"{statistics.median(r['tokens_per_sec'] for r in rows):.0f} {statistics.median(r['ms'] for r in rows):.0f}")
PY
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
  "load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-28s %10s %10s\n' config setup "tok/s" "ms/step"
for c in "tiny 4 256 4" "small 6 384 6"; do
  set -- $c
  read -r t0 m0 < <(run "$1-1x1" "$2" "$3" "$4" 1 1 true)
  read -r t1 m1 < <(run "$1-1x2" "$2" "$3" "$4" 1 2 true)
  read -r t2 m2 < <(run "$1-2x1" "$2" "$3" "$4" 2 1 true)
  read -r t3 m3 < <(run "$1-2x1-sync" "$2" "$3" "$4" 2 1 false)
  # Rows of the measured-throughput table (configs/throughput.jsonl; RECORD=0 skips): 1 rank x 1 thread
  # and 2 ranks x 1 thread give the scaling efficiency from 1 to 2 ranks that estimates use.
  for r in "1x1 1 1 $t0" "1x2 1 2 $t1" "2x1 2 1 $t2"; do
    set -- $1 $r
    /usr/bin/python3 bench/record_throughput.py --bin "$BIN" --config "$work/$1-$2.yaml" --tokens-per-s "$5" \
      --world-size "$3" --threads-per-rank "$4" --device cpu --command "bench/ddp_cpu/train.sh $BUILD $STEPS" \
      --source bench/ddp_cpu
    set -- $c
  done
  printf '%-6s %-28s %10s %10s\n' "$1" "1 process x 1 thread" "$t0" "$m0"
  printf '%-6s %-28s %10s %10s\n' "$1" "1 process x 2 threads" "$t1" "$m1"
  printf '%-6s %-28s %10s %10s\n' "$1" "2 processes x 1 thread" "$t2" "$m2"
  printf '%-6s %-28s %10s %10s\n' "$1" "2 x 1, overlap off" "$t3" "$m3"
  echo "$1: 2x1 / (2 x 1x1) = $(/usr/bin/python3 -c "print(f'{$t2/(2*$t0):.2f}')") (scaling efficiency);" \
    "2x1 / 1x2 = $(/usr/bin/python3 -c "print(f'{$t2/$t1:.2f}')");" \
    "overlap on vs off: $(/usr/bin/python3 -c "print(f'{$m3/$m2:.2f}')")x faster step"
done
