#!/usr/bin/env bash
# Training throughput on CPU, ours vs PyTorch, in one run (issue 4's bench): the same GPT-2 shapes, fp32,
# 2 threads, random token ids (throughput does not depend on their values).
#   configs: tiny  = 4 layers, d=256, 4 heads, T=256, B=8, vocab 50257
#            small = 6 layers, d=384, 6 heads, T=256, B=8, vocab 50257
# PyTorch: ../shared/bench/torch_cpu_gpt.py (Debian's python3-torch on OpenBLAS, glibc malloc tuned).
# Usage: bench/train_cpu/run.sh [BUILD_DIR] [STEPS]   (appends our rows to configs/throughput.jsonl; RECORD=0 skips)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/release}
STEPS=${2:-12}
BIN=$BUILD/llmtrain
SHARED=${LLMT_SHARED_DIR:-../shared}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 bench/random_shard.py "$work/train_000000.bin"

ours() {  # name n_layer d_model n_head
  local cfg="$work/$1.yaml"
  cat >"$cfg" <<YAML
run: {name: bench, seed: 1, device: cpu, threads: 2}
model: {n_layer: $2, n_head: $4, d_model: $3, block_size: 256, vocab_size: 50257}
trainer: {max_steps: $STEPS, micro_batch_size: 8, warmup_steps: 1, log_every_steps: 1, eval_every_steps: 0,
          save_every_steps: 0}
data: {train_shards: $work/train_*.bin}
output: {root_dir: $work/runs, run_id: $1}
tracking: {jsonl: true}
YAML
  "$BIN" train --config "$cfg" >/dev/null 2>"$work/$1.log"
  # Median tokens/s over the steps after the first two (warm-up).
  /usr/bin/python3 - "$work/runs/$1/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
print(f"{statistics.median(r['tokens_per_sec'] for r in rows[2:]):.0f}")
PY
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "gemm backend: $("$BIN" version --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["blas"])')"
tiny=$(ours tiny 4 256 4)
small=$(ours small 6 384 6)
# Our figures become rows of the measured-throughput table (configs/throughput.jsonl; RECORD=0 skips).
for c in "tiny $tiny" "small $small"; do
  set -- $c
  /usr/bin/python3 bench/record_throughput.py --bin "$BIN" --config "$work/$1.yaml" --tokens-per-s "$2" \
    --world-size 1 --threads-per-rank 2 --device cpu --command "bench/train_cpu/run.sh $BUILD $STEPS" \
    --source bench/train_cpu
done
/usr/bin/python3 "$SHARED/bench/torch_cpu_gpt.py" --blas openblas --configs tiny,small --threads 2 --warmup 2 \
  --steps 5 --no-gemm --out "$work/torch.json" >"$work/torch.log" 2>&1 || { cat "$work/torch.log"; exit 1; }
/usr/bin/python3 - "$work/torch.json" "$tiny" "$small" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))
rows = res["results"] if isinstance(res, dict) and "results" in res else res
def torch_tps(name):
    for r in rows:
        if r.get("config") == name:
            return r.get("tok_s")
    return None
print(f"{'config':<8}{'llmtrain tok/s':>16}{'pytorch tok/s':>16}{'ratio':>8}")
for name, ours in (("tiny", float(sys.argv[2])), ("small", float(sys.argv[3]))):
    t = torch_tps(name)
    ratio = f"{ours / t:.2f}x" if t else "n/a"
    print(f"{name:<8}{ours:>16.0f}{(t or float('nan')):>16.0f}{ratio:>8}")
PY
