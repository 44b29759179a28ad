#!/usr/bin/env bash
# On the GPU machine (after run_cuda_tests.sh unpacked build/gpu-carry.tgz to /tmp/g): per-kernel GPU time of
# one GPT-2 124M training step (bf16) through Nsight Compute (one metric, clocks left alone), summed by kernel name.
set -uo pipefail
out=${OUT:-/tmp/out}
source tools/gpu/env.sh
B=${1:-4}
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu \
  /usr/local/cuda*/nsight-compute*/ncu 2>/dev/null | head -1)
echo "ncu: ${ncu:-not found}"
timeout 300 "${ncu:-ncu}" --clock-control none --metrics gpu__time_duration.sum --csv \
  /tmp/g/bin/train_gpu_bench --batch "$B" --steps 1 --warmup 0 --no-check --no-peak \
  > "$out/ncu_step.csv" 2> "$out/ncu_step.err"
echo "ncu rc=$?"
python3 - "$out/ncu_step.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; k = hdr.index("Kernel Name"); v = hdr.index("Metric Value"); u = hdr.index("Metric Unit")
tot = collections.Counter(); cnt = collections.Counter()
for r in rows[1:]:
    scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0}.get(r[u], 1.0)
    name = r[k].split("(")[0][:70]
    tot[name] += float(r[v].replace(",", "")) * scale; cnt[name] += 1
s = sum(tot.values())
print(f"total GPU time {s:.1f} ms over {sum(cnt.values())} kernels")
for n, t in tot.most_common(15): print(f"{t:9.2f} ms {100*t/s:5.1f}% x{cnt[n]:4d} {n}")
PY
