#!/usr/bin/env bash
# Multi-GPU data parallelism on one host (issue 6 point 3, issue 7 run 1-2), in ONE device call (< 8 min):
#   1. tests/distributed/nccl_process_group_test (NCCL collectives, device Reducer, killed peer -> DistTimeout);
#   2. GPT-2 124M (T=1024, B=16 per GPU, bf16, random tokens) with `llmtrain launch --nproc-per-node N` for
#      N = 1, 2, 4 (up to the GPU count): DDP with overlap on, overlap off, ZeRO-1; tokens/s per GPU and
#      scaling efficiency = tok/s(N) / (N x tok/s(1));
#   3. the 1-GPU run on the same global batch (B=16N rows a step) vs the N-GPU run: losses step by step.
# Everything goes under $OUT (logs, metrics, summary.txt). NCCL_* variables of the machine pass through
# untouched (NCCL_NVLS_ENABLE=0 must stay set there).
# Usage on the GPU machine, from the repository root, with build/multi-gpu-carry.tgz (32 MB) made here by
#   tools/gpu/pack.sh build/multi-gpu-carry build/<cuda-dir>/llmtrain \
#     build/<cuda-dir>/tests/distributed/nccl_process_group_test
# and carried (CARRY=... names another tarball; build/gpu-carry.tgz is the fallback):
#   bash tools/gpu/run_multi_gpu.sh
# Dry run here (no GPU): NGPU=2 DRY_RUN=1 LLMTRAIN_BIN=build/<cpu-dir>/llmtrain bash tools/gpu/run_multi_gpu.sh
#   prints every launch command and checks it with `llmtrain launch --dry-run` and the config with
#   `llmtrain validate`; without NGPU on a machine with no GPU it prints that it skipped.
# Knobs: STEPS (default 30), NGPU (default: nvidia-smi's count), MAX_N (default 4), TESTS=0 skips step 1.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}
mkdir -p "$out"
STEPS=${STEPS:-30}
MAX_N=${MAX_N:-4}
DRY_RUN=${DRY_RUN:-0}
t_start=$(date +%s)
summary="$out/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }

# --- binaries: the carried tarball, else LLMTRAIN_BIN (and the test beside the build) -------------------
CARRY=${CARRY:-build/multi-gpu-carry.tgz}
[ -f "$CARRY" ] || CARRY=build/gpu-carry.tgz
if [ -z "${LLMTRAIN_BIN:-}" ] && [ -f "$CARRY" ]; then
  mkdir -p /tmp/mg
  tar xzf "$CARRY" -C /tmp/mg
  LLMTRAIN_BIN=/tmp/mg/bin/llmtrain
  NCCL_TEST=/tmp/mg/bin/nccl_process_group_test
  export LD_LIBRARY_PATH=/tmp/mg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
LLMTRAIN_BIN=${LLMTRAIN_BIN:-build/release/llmtrain}
NCCL_TEST=${NCCL_TEST:-$(dirname "$LLMTRAIN_BIN")/tests/distributed/nccl_process_group_test}
# cuBLASLt and NCCL come from the machine's CUDA (not carried: hundreds of MB): the toolkit's lib dirs,
# else the pip wheels PyTorch uses.
for name in 'libcublasLt.so.13*' 'libnccl.so.2*'; do
  lib=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/local/cuda*/targets /usr/lib /usr/local/lib \
        -name "$name" 2>/dev/null | head -1)
  [ -z "$lib" ] && lib=$(python3 -c 'import glob,site,sys; p=[f for d in site.getsitepackages()
    for f in glob.glob(d+"/nvidia/*/lib/"+sys.argv[1])]; print(p[0] if p else "")' "$name" 2>/dev/null)
  [ -n "$lib" ] && export LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "library $name: ${lib:-not found}"
done

if [ -z "${NGPU:-}" ]; then
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
NGPU=${NGPU:-0}
say "run_multi_gpu: $(date -u +%FT%TZ) host $(hostname) NGPU=$NGPU STEPS=$STEPS bin=$LLMTRAIN_BIN dry_run=$DRY_RUN"
nvidia-smi --query-gpu=index,name,driver_version,memory.total,power.limit --format=csv,noheader 2>/dev/null |
  tee -a "$summary"
nvidia-smi topo -m >"$out/topo.txt" 2>&1 || true
env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)_' | sort | tee "$out/nccl_env.txt" | sed 's/^/env: /' | tee -a "$summary"
if [ "$NGPU" -lt 1 ] && [ "$DRY_RUN" != 1 ]; then
  say "SKIPPED: no GPU visible (nvidia-smi shows $NGPU); nothing to run (DRY_RUN=1 NGPU=2 checks the commands)"
  exit 0
fi
if [ ! -x "$LLMTRAIN_BIN" ]; then
  say "ERROR: $LLMTRAIN_BIN is not an executable (carry build/gpu-carry.tgz or set LLMTRAIN_BIN)"
  exit 1
fi
"$LLMTRAIN_BIN" version 2>&1 | head -5 | tee -a "$summary"

# --- 1. GPU tests ------------------------------------------------------------------------------------
if [ "${TESTS:-1}" = 1 ] && [ "$DRY_RUN" != 1 ]; then
  if [ -x "$NCCL_TEST" ]; then
    LLMTRAIN_BIN=$LLMTRAIN_BIN timeout 200 "$NCCL_TEST" >"$out/nccl_process_group_test.log" 2>&1
    rc=$?
    grep -E '^\[ +(OK|FAILED|SKIPPED) +\]|SKIPPED:|survivor failed|PASSED|FAILED TEST' \
      "$out/nccl_process_group_test.log" | tee -a "$summary"
    say "nccl_process_group_test rc=$rc ($(($(date +%s) - t_start)) s so far)"
  else
    say "nccl_process_group_test: $NCCL_TEST not found (not carried?)"
  fi
fi

# --- 2./3. training runs ----------------------------------------------------------------------------
work=$out/train
mkdir -p "$work"
# Run directories outside $OUT: each run ends with a checkpoint (~1.5 GB for 124M with AdamW state) that
# must not travel back; metrics.jsonl, summary.json and the rank logs are copied into $OUT/train/NAME/.
runs_root=/tmp/llmt_multi_gpu_runs
rm -rf "$runs_root"
shard_dir=/tmp/llmt_multi_gpu_data
mkdir -p "$shard_dir"
if [ ! -s "$shard_dir/train_000000.bin" ]; then
  PY=python3
  [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import numpy' 2>/dev/null && PY=/usr/bin/python3
  $PY bench/random_shard.py "$shard_dir/train_000000.bin" || { say "ERROR: cannot write the random shard"; exit 1; }
fi

# config NAME ROWS ACCUM OVERLAP ZERO -> path of a GPT-2 124M config (bf16, T=1024, random tokens)
config() {
  local f="$work/$1.yaml"
  cat >"$f" <<YAML
run: {name: multi-gpu, seed: 1, device: cuda}
model: {n_layer: 12, n_head: 12, d_model: 768, block_size: 1024, vocab_size: 50257, dropout: 0.0}
trainer: {max_steps: $STEPS, micro_batch_size: $2, grad_accum_steps: $3, precision: bf16, lr: 6.0e-4,
          warmup_steps: 5, log_every_steps: 1, eval_every_steps: 0, save_every_steps: 0}
dist: {overlap: $4, zero_stage: $5, timeout_sec: 120}
data: {train_shards: $shard_dir/train_*.bin, shuffle: false}
output: {root_dir: $runs_root, run_id: $1}
YAML
  echo "$f"
}

# run NAME NPROC ROWS ACCUM OVERLAP ZERO: one launch; logs to $work/NAME.log
ran=()
run() {
  local name=$1 n=$2 cfg
  cfg=$(config "$1" "$3" "$4" "$5" "$6")
  rm -rf "${runs_root:?}/$name"
  local cmd=("$LLMTRAIN_BIN" launch --standalone --nproc-per-node "$n" -- train --config "$cfg")
  echo "+ ${cmd[*]}" | tee -a "$summary"
  if [ "$DRY_RUN" = 1 ]; then
    "$LLMTRAIN_BIN" validate --config "$cfg" >"$work/$name.validate.log" 2>&1 ||
      { say "  INVALID config $cfg:"; sed 's/^/    /' "$work/$name.validate.log" | tee -a "$summary"; return 1; }
    "$LLMTRAIN_BIN" launch --dry-run --standalone --nproc-per-node "$n" -- train --config "$cfg" \
      >"$work/$name.dryrun.log" 2>&1 ||
      { say "  launch --dry-run FAILED:"; tail -5 "$work/$name.dryrun.log"; return 1; }
    say "  ok: config validates, launch --dry-run lists $(grep -c 'LOCAL_RANK=' "$work/$name.dryrun.log") worker(s)"
    return 0
  fi
  local t0=$(date +%s)
  timeout -k 20 150 "${cmd[@]}" >"$work/$name.out" 2>"$work/$name.log"
  local rc=$?
  say "  $name: rc=$rc in $(($(date +%s) - t0)) s"
  mkdir -p "$work/$name"
  cp -r "$runs_root/$name/metrics.jsonl" "$runs_root/$name/summary.json" "$runs_root/$name/logs" \
    "$work/$name/" 2>/dev/null
  rm -rf "${runs_root:?}/$name/checkpoints"
  [ $rc = 0 ] || tail -15 "$work/$name.log" | sed 's/^/    /' | tee -a "$summary"
  ran+=("$name:$n")
}

# Budget: each run ~20-40 s (start-up, NCCL init, $STEPS steps); stop starting new ones after 6 min (each run
# is cut at 150 s, the tests at 200 s).
over_budget() { [ $(($(date +%s) - t_start)) -gt 360 ]; }
run n1 1 16 1 true 0
for n in 2 4 8; do
  [ "$n" -le "$NGPU" ] && [ "$n" -le "$MAX_N" ] || continue
  for v in "ddp true 0" "sync false 0" "zero1 true 1"; do
    set -- $v
    over_budget && { say "  (time budget: skipping n$n-$1)"; continue; }
    run "n$n-$1" "$n" 16 1 "$2" "$3"
  done
  # The same global batch (16N rows of 1024 a step) on one GPU: B=16N when it fits, else accumulation.
  over_budget && { say "  (time budget: skipping the 1-GPU reference for N=$n)"; continue; }
  if [ "$n" -le 2 ]; then run "ref$n" 1 $((16 * n)) 1 true 0; else run "ref$n" 1 32 $((n / 2)) true 0; fi
done
[ "$DRY_RUN" = 1 ] && { say "dry run done ($(($(date +%s) - t_start)) s)"; exit 0; }

# --- report ------------------------------------------------------------------------------------------
python3 - "$work" "${ran[@]}" <<'PY' | tee -a "$summary"
import json, os, statistics, sys
root, runs = sys.argv[1], [r.split(":") for r in sys.argv[2:]]
def metrics(name):
    p = os.path.join(root, name, "metrics.jsonl")
    if not os.path.exists(p):
        return []
    return [json.loads(l) for l in open(p) if '"loss"' in l]
def tps(rows):  # median tokens/s over steps after the first 5 (start-up, cuBLAS/NCCL warm-up)
    rows = rows[5:] if len(rows) > 8 else rows[1:]
    return statistics.median(r["tokens_per_sec"] for r in rows) if rows else float("nan")
base = tps(metrics("n1"))
print(f"{'run':<12}{'GPUs':>5}{'tok/s':>12}{'tok/s/GPU':>12}{'ms/step':>9}{'scaling':>9}{'final loss':>12}")
for name, n in runs:
    n = int(n)
    rows = metrics(name)
    if not rows:
        print(f"{name:<12}{n:>5}   (no metrics: see train/{name}.log)")
        continue
    t = tps(rows)
    ms = statistics.median(r["ms"] for r in rows[5:] or rows)
    eff = t / (n * base) if name.startswith("n") and base == base and base > 0 else float("nan")
    print(f"{name:<12}{n:>5}{t:>12.0f}{t / n:>12.0f}{ms:>9.1f}{eff:>9.3f}{rows[-1]['loss']:>12.4f}")
# Same global batch: the 1-GPU reference vs the N-GPU DDP and ZeRO-1 runs, step by step. bf16 compute
# differs in reduction order (per-rank partial sums, the all-reduce), so losses agree to ~1e-2 relative,
# not bit for bit.
for name, n in runs:
    if not name.startswith("ref"):
        continue
    n = int(name[3:])  # ref<N>: one GPU on the global batch of N GPUs
    ref = {r["step"]: r["loss"] for r in metrics(name)}
    for other in (f"n{n}-ddp", f"n{n}-sync", f"n{n}-zero1"):
        got = {r["step"]: r["loss"] for r in metrics(other)}
        common = sorted(set(ref) & set(got))
        if not common:
            print(f"loss match {other} vs {name}: no common steps")
            continue
        d = [abs(got[s] - ref[s]) / abs(ref[s]) for s in common]
        worst = max(range(len(d)), key=lambda i: d[i])
        print(f"loss match {other} vs {name} (same global batch, {len(common)} steps): max rel diff {max(d):.2e} "
              f"at step {common[worst]} ({got[common[worst]]:.4f} vs {ref[common[worst]]:.4f}); "
              f"step 1 {got[common[0]]:.4f} vs {ref[common[0]]:.4f}; "
              f"last {got[common[-1]]:.4f} vs {ref[common[-1]]:.4f}")
PY
say "total $(($(date +%s) - t_start)) s"
