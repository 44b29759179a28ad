#!/usr/bin/env bash
# trainer.precision auto against fp32 and bf16 on this host: ROUNDS rounds of fp32, bf16 and auto in turn, 8 steps
# of configs/presets/gpt2_tiny_cpu.yaml each on a random shard, run.deterministic on. Prints per run the median
# step's tok/s (steps 3-8), tokens per CPU-second of the process, what meta.json says auto chose, and whether
# auto's losses and gradient norms equal the chosen precision's bit for bit. The probe's cache is this
# checkout's data/cache/cpu_precision (delete it to measure again).
# Usage: bench/train_cpu/precision_auto.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build/release}/llmtrain
ROUNDS=${2:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
/usr/bin/python3 bench/random_shard.py "$WORK/train_000000.bin" > /dev/null
common=(--set trainer.max_steps=8 --set "data.train_shards=$WORK/train_*.bin" --set trainer.eval_every_steps=0
        --set trainer.save_every_steps=0 --set "output.root_dir=$WORK/runs" --set trainer.log_every_steps=1
        --set run.deterministic=true)
for round in $(seq "$ROUNDS"); do
  for p in fp32 bf16 auto; do
    /usr/bin/time -f "%U %S" -o "$WORK/time_${p}_$round" "$BIN" train --config configs/presets/gpt2_tiny_cpu.yaml \
      "${common[@]}" --set trainer.precision=$p --set output.run_id=${p}_$round > "$WORK/out_${p}_$round.txt" 2>&1
  done
done
grep -h "^precision: auto" "$WORK/out_auto_1.txt"
/usr/bin/python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def rows(run):
    return [json.loads(l) for l in open(f"{work}/runs/{run}/metrics.jsonl") if '"loss"' in l]
for p in ["fp32", "bf16", "auto"]:
    for r in range(1, rounds + 1):
        m = rows(f"{p}_{r}")
        u, s = map(float, open(f"{work}/time_{p}_{r}").read().split()[-2:])
        chosen = json.load(open(f"{work}/runs/{p}_{r}/meta.json"))["precision"]["chosen"]
        print(f"{p} round {r}: {statistics.median(x['tokens_per_sec'] for x in m[2:]):.0f} tok/s, "
              f"{8 * 8 * 256 / (u + s):.0f} tokens per CPU-second, chosen {chosen}")
chosen = json.load(open(f"{work}/runs/auto_1/meta.json"))["precision"]["chosen"]
same = all([(x["loss"], x["grad_norm"]) for x in rows(f"auto_{r}")] ==
           [(x["loss"], x["grad_norm"]) for x in rows(f"{chosen}_1")] for r in range(1, rounds + 1))
print(f"auto's losses and gradient norms equal {chosen}'s bit for bit: {same}")
PY
