#!/usr/bin/env bash
# Training images/s of the image-classifier presets under `llmtrain train` (the rows `llmtrain estimate`
# and the server's estimates use for model.arch mlp/cnn; configs/throughput.jsonl, RECORD=0 skips).
# Each preset runs STEPS optimizer steps at its own micro-batch (128) on the CPU: 1 process x 1 thread,
# 1 process x all cores, then 2 processes x 1 thread (llmtrain launch --standalone, Gloo; paired with the
# 1 x 1 row, the scaling efficiency estimates use, as bench/ddp_cpu's rows); the rate
# is the median of the logged steps after the first two (warm-up). The test set is evaluated at the
# end of every run, which is not timed (images_per_sec is the training loop's).
# Usage: bench/train_classifier/run.sh [BUILD_DIR] [STEPS] [PRESETS...]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
STEPS=${2:-40}
shift $(( $# > 2 ? 2 : $# )) || true
PRESETS=("${@:-fashion_mnist_cnn fashion_mnist_mlp}")
BIN=$BUILD/llmtrain
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run PRESET NPROC THREADS -> median images/s of all ranks
run() {
  local cfg="$work/$1-$2x$3.yaml"
  "$BIN" print-config --config "configs/presets/$1.yaml" --set run.device=cpu --set run.threads="$3" \
    --set trainer.epochs=0 --set trainer.max_steps="$STEPS" --set trainer.warmup_steps=1 \
    --set trainer.log_every_steps=2 --set trainer.eval_every_steps=0 --set trainer.save_every_steps=0 \
    --set output.root_dir="$work/runs" --set output.run_id="$1-$2x$3" >"$cfg"
  if [ "$2" = 1 ]; then
    "$BIN" train --config "$cfg" >/dev/null 2>"$work/log"
  else
    "$BIN" launch --standalone --nproc-per-node "$2" -- train --config "$cfg" >/dev/null 2>"$work/log"
  fi || { cat "$work/log" >&2; exit 1; }
  /usr/bin/python3 - "$work/runs/$1-$2x$3/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if "images_per_sec" in r][2:]  # past the warm-up
print(f"{statistics.median(r['images_per_sec'] for r in rows):.0f}")
PY
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
  "load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-20s %-24s %10s\n' preset setup "images/s"
for p in ${PRESETS[@]}; do
  for setup in "1 1" "1 $(nproc)" "2 1"; do
    set -- $setup
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    ips=$(run "$p" "$1" "$2")
    printf '%-20s %-24s %10s\n' "$p" "$1 process(es) x $2 thread(s)" "$ips"
    printf -v machine '%s (%s cores, family %s model %s), load %s before the run' \
      "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)" "$(nproc)" \
      "$(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | xargs)" \
      "$(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | xargs)" "$load"
    /usr/bin/python3 bench/record_throughput.py --bin "$BIN" --config "$work/$p-$1x$2.yaml" --images-per-s "$ips" \
      --world-size "$1" --threads-per-rank "$2" --device cpu --machine "$machine" \
      --command "bench/train_classifier/run.sh $BUILD $STEPS" --source bench/train_classifier
  done
done
