#!/usr/bin/env bash
# Image classification on CPU, ours vs PyTorch in one run (issue 21): the presets' CNN and MLP
# (configs/presets/fashion_mnist_{cnn,mlp}.yaml), batch 128, AdamW, the same threads.
#   ours:    `llmtrain train` for STEPS steps on Fashion-MNIST, trainer.precision fp32 and bf16 (bf16 GEMM
#            operands, fp32 accumulation and weights; native on AVX512_BF16, emulated elsewhere): training
#            images/s = the median step's (metrics.jsonl tokens_per_sec / 784 pixels), inference = the test
#            set's evaluation (summary.json test_images_per_sec, batch 128, 10,000 images)
#   PyTorch: bench/classifier_cpu/torch_classifier.py (Debian's python3-torch), the same shapes, fp32 and
#            torch.autocast("cpu", dtype=torch.bfloat16) (--autocast).
# Ratios are against the faster PyTorch mode of each column. Prints the CPU (family/model/ISA, through
# bench/train_cpu/compare.py's cpu_line) and the load.
# Usage: bench/classifier_cpu/run.sh [BUILD_DIR] [STEPS] [THREADS]   target: ours >= 2x PyTorch
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
STEPS=${2:-60}
THREADS=${3:-2}
BIN=$BUILD/llmtrain
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ours() {  # preset precision -> "train_ips infer_ips"
  "$BIN" train --config "configs/presets/fashion_mnist_$1.yaml" --set trainer.epochs=0 \
    --set "trainer.max_steps=$STEPS" \
    --set trainer.warmup_steps=5 --set trainer.eval_every_steps=0 --set trainer.save_every_steps=0 \
    --set trainer.log_every_steps=1 --set run.device=cpu --set "run.threads=$THREADS" --set "trainer.precision=$2" \
    --set "output.root_dir=$work/runs" --set "output.run_id=$1-$2" >/dev/null 2>"$work/$1-$2.log"
  /usr/bin/python3 - "$work/runs/$1-$2" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"loss"' in l]
s = json.load(open(sys.argv[1] + "/summary.json"))
print(f"{statistics.median(r['tokens_per_sec'] for r in rows[2:]) / 784:.0f} {s['test_images_per_sec']:.0f}")
PY
}

torch_run() {  # arch [--autocast] -> "train_ips infer_ips"
  local targs
  if [ "$1" = cnn ]; then
    targs=(--arch cnn --conv 32,64 --hidden 128 --dropout 0.25)
  else
    targs=(--arch mlp --conv "" --hidden 256,128 --dropout 0.1)
  fi
  /usr/bin/python3 bench/classifier_cpu/torch_classifier.py "${targs[@]}" --batch 128 --threads "$THREADS" \
    --steps "$STEPS" "${@:2}" |
    /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.0f %.0f" % (j["train_images_per_sec"],
      j["infer_images_per_sec"]))'
}

ratio() { /usr/bin/python3 -c "print(f'{$1 / max($2, $3):.2f}x')"; }

echo "cpu: $(cd bench/train_cpu && /usr/bin/python3 -c 'from compare import cpu_line; print(cpu_line())')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); threads $THREADS; batch 128; $STEPS steps;" \
  "$(date -u '+%Y-%m-%d %H:%M UTC')"
printf "%-4s %-5s %12s %12s %12s %7s | %12s %12s %12s %7s\n" \
  model ours "ours train/s" "torch fp32" "torch bf16" ratio \
  "ours infer/s" "torch fp32" "torch bf16" ratio
for arch in cnn mlp; do
  read -r tf tfi < <(torch_run $arch)
  read -r tb tbi < <(torch_run $arch --autocast)
  for prec in fp32 bf16; do
    read -r ot oi < <(ours $arch $prec)
    printf "%-4s %-5s %12s %12s %12s %7s | %12s %12s %12s %7s\n" $arch $prec "$ot" "$tf" "$tb" \
      "$(ratio "$ot" "$tf" "$tb")" "$oi" "$tfi" "$tbi" "$(ratio "$oi" "$tfi" "$tbi")"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ours bf16: $(grep -m1 -o 'bf16 GEMMs[^)]*)' "$work/cnn-bf16.log" || echo '?')"
