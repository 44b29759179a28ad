#!/usr/bin/env bash
# Issue 7's runs beyond tools/gpu/run_multi_gpu.sh (scaling, overlap on/off, ZeRO-1, loss match), in ONE
# device call on a multi-GPU host (< 8 min), with the same carried binaries (build/multi-gpu-carry.tgz):
#   1. GPT-2 350M (24 layers, d=1024, 16 heads, T=1024, bf16, B=8 per GPU) on 1 GPU and on all N GPUs,
#      ZeRO-1 off and on: tokens/s, MFU = (6N + 12LCT) tok/s / (GPUs x 989 TFLOP/s), and the peak GPU memory
#      per GPU (nvidia-smi sampled every 200 ms while the run lasts);
#   2. fault: GPT-2 124M on N GPUs under `llmtrain launch --max-restarts 1` (checkpoint every 20 steps,
#      80 steps); one worker is killed with SIGKILL after step 30; the job must resume from step 20 and
#      finish at step 80; time lost = wall time - the same run's wall time without the kill.
# Usage there: bash bench/multi_gpu/extras.sh   (everything under $OUT/extras)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}/extras
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
t_start=$(date +%s)
mkdir -p /tmp/mg && tar xzf "${CARRY:-build/multi-gpu-carry.tgz}" -C /tmp/mg
BIN=/tmp/mg/bin/llmtrain
export LD_LIBRARY_PATH=/tmp/mg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for name in 'libcublasLt.so.13*' 'libnccl.so.2*'; do
  lib=$(find /usr/local/cuda*/targets /usr/local/cuda*/lib64 /usr/lib/x86_64-linux-gnu -name "$name" 2>/dev/null |
    head -1)
  [ -n "$lib" ] && export LD_LIBRARY_PATH=$(dirname "$lib"):$LD_LIBRARY_PATH
done
NGPU=$(nvidia-smi -L | grep -c '^GPU')
say "extras: $(date -u +%FT%TZ) NGPU=$NGPU $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
runs=/tmp/llmt_extras_runs
data=/tmp/llmt_extras_data
mkdir -p "$data"
[ -s "$data/train_000000.bin" ] || python3 bench/random_shard.py "$data/train_000000.bin"

# config NAME LAYERS D HEADS ROWS STEPS ZERO SAVE_EVERY
config() {
  cat >"$out/$1.yaml" <<YAML
run: {name: extras, seed: 1, device: cuda}
model: {n_layer: $2, n_head: $4, d_model: $3, block_size: 1024, vocab_size: 50257, dropout: 0.0}
trainer: {max_steps: $6, micro_batch_size: $5, precision: bf16, lr: 3.0e-4, warmup_steps: 5, log_every_steps: 1,
          eval_every_steps: 0, save_every_steps: $8}
dist: {zero_stage: $7, timeout_sec: 60}
data: {train_shards: $data/train_*.bin, shuffle: false}
output: {root_dir: $runs, run_id: $1}
YAML
  echo "$out/$1.yaml"
}
tps() {  # NAME -> median tokens/s over steps 6..
  python3 -c "
import json,statistics,sys
r=[json.loads(l) for l in open('$runs/$1/metrics.jsonl') if '\"loss\"' in l]
print(f\"{statistics.median(x['tokens_per_sec'] for x in r[5:]):.0f} {r[-1]['step']}\")"
}

# --- 1. GPT-2 350M ---------------------------------------------------------------------------------------
FPT=$("$BIN" estimate --config "$(config probe 24 1024 16 8 20 0 0)" --json --throughput-file /dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["flops_per_token"])')
say "GPT-2 350M: $FPT FLOPs/token (6N + 12LCT)"
printf '%-14s %5s %12s %10s %8s %16s\n' run GPUs tok/s tok/s/GPU MFU "peak MiB/GPU" | tee -a "$summary"
for v in "m350-n1 1 0" "m350-n$NGPU $NGPU 0" "m350-n$NGPU-zero1 $NGPU 1"; do
  set -- $v
  cfg=$(config "$1" 24 1024 16 8 25 "$3" 0)
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 200 >"$out/$1.mem" 2>/dev/null &
  smi=$!
  timeout -k 10 120 "$BIN" launch --standalone --nproc-per-node "$2" -- train --config "$cfg" \
    >"$out/$1.out" 2>"$out/$1.log"
  rc=$?
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  [ $rc = 0 ] || { say "$1: rc=$rc"; tail -5 "$out/$1.log" | tee -a "$summary"; continue; }
  read -r t last < <(tps "$1")
  peak=$(awk -F', ' -v n="$2" '$1 < n && $2 > m[$1] {m[$1] = $2}
    END {s = ""; for (i = 0; i < n; i++) s = s (i ? "/" : "") m[i]; print s}' "$out/$1.mem")
  mfu=$(python3 -c "print(f'{$FPT * $t / ($2 * 989e12) * 100:.1f}%')")
  printf '%-14s %5s %12s %10.0f %8s %16s\n' "$1" "$2" "$t" "$(python3 -c "print($t / $2)")" "$mfu" "$peak" |
    tee -a "$summary"
  rm -rf "${runs:?}/$1/checkpoints"
done

# --- 2. kill one worker, restart from the last checkpoint --------------------------------------------------
fault() {  # NAME KILL(0/1) -> wall seconds
  local cfg t0
  cfg=$(config "$1" 12 768 12 16 80 0 20)
  rm -rf "${runs:?}/$1"
  t0=$(date +%s.%N)
  "$BIN" launch --standalone --nproc-per-node "$NGPU" --max-restarts 1 -- train --config "$cfg" \
    >"$out/$1.out" 2>"$out/$1.log" &
  local launcher=$!
  if [ "$2" = 1 ]; then
    for _ in $(seq 600); do
      n=$(grep -c "\"loss\"" "$runs/$1/metrics.jsonl" 2>/dev/null); [ "${n:-0}" -ge 30 ] && break
      sleep 0.1
    done
    victim=$(pgrep -P "$launcher" | sed -n 2p)
    say "fault: killing worker pid $victim (2nd child of the launcher)" \
      "after step $(grep -c '"loss"' "$runs/$1/metrics.jsonl")"
    kill -9 "$victim"
  fi
  wait $launcher
  local rc=$?
  python3 -c "import time; print(f'{time.time() - $t0:.1f}')" >"$out/$1.wall"
  say "$1: launcher rc=$rc, wall $(cat "$out/$1.wall") s," \
    "final step $(python3 -c "import json; print(json.load(open('$runs/$1/summary.json')).get('steps'))" 2>/dev/null)"
}
fault clean 0
fault killed 1
grep -E "restart|resum|lost|exited|signal" "$out/killed.log" | head -12 | tee -a "$summary"
say "time lost to the kill: $(python3 -c "print(f'{$(cat "$out/killed.wall") - $(cat "$out/clean.wall"):.1f} s')")"
rm -rf "$runs"
say "total $(($(date +%s) - t_start)) s"
