#!/usr/bin/env bash
# torch's TCPStore protocol against PyTorch 2.x (issue 24), in ONE device call (~3 min, CPU work only):
#   (a) tests/distributed/torch_store_interop_test with that machine's python3 (torch 2.x): our client against
#       torch.distributed.TCPStore and torch's client against our server, every 2.x query (validate, ping,
#       append, multi_get/multi_set, queue_*, cancel_wait), a timed-out wait, a vanished server; a SKIP
#       counts as a failure here (torch 2.x must be found);
#   (b) torchrun --standalone --nproc-per-node 2 --no-python llmtrain train (tiny CPU config);
#   (c) two torchrun processes on this host: --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d;
#   (e) torchrun with a static rendezvous (the agent store: TORCHELASTIC_USE_AGENT_STORE=True) and
#       --max-restarts 1 with one worker killed after a checkpoint (resumes and finishes);
#   (d) the same config under `llmtrain launch --nproc-per-node 2`; (b), (c), (e's first run) must log the
#       same loss as (d) at every step. Ends with one line: "torchstore_check: PASS" or "... FAIL (...)".
# Everything (logs, the commands, summary.txt) goes under $OUT.
# Here:  tools/gpu/pack.sh build/gpu-carry build/release/llmtrain \
#          build/release/tests/distributed/torch_store_interop_test
# There: bash tools/gpu/torchstore_check.sh      (carry build/gpu-carry.tgz; PYTHON=... picks another python)
set -uo pipefail
cd "$(dirname "$0")/../.."
src=$PWD
out=${OUT:-/tmp/out}
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
fails=()

if [ -z "${LLMTRAIN_BIN:-}" ]; then
  source tools/gpu/env.sh
  LLMTRAIN_BIN=/tmp/g/bin/llmtrain
  INTEROP_TEST=/tmp/g/bin/torch_store_interop_test
fi
INTEROP_TEST=${INTEROP_TEST:-$(dirname "$LLMTRAIN_BIN")/tests/distributed/torch_store_interop_test}
PYTHON=${PYTHON:-$(command -v python3)}
TORCHRUN=${TORCHRUN:-$(dirname "$PYTHON")/torchrun}
[ -x "$TORCHRUN" ] || TORCHRUN=$(command -v torchrun || echo torchrun)
say "torchstore_check: $(date -u +%FT%TZ) host $(hostname) bin=$LLMTRAIN_BIN python=$PYTHON torchrun=$TORCHRUN"
say "torch: $("$PYTHON" -c 'import torch; print(torch.__version__)' 2>&1)"

# --- (a) the interop tests against torch 2.x ------------------------------------------------------------
LLMTRAIN_TORCH_PYTHON=$PYTHON LLMTRAIN_SOURCE_DIR=$src timeout 300 "$INTEROP_TEST" >"$out/interop.log" 2>&1
rc=$?
grep -E '^\[ +(OK|FAILED|SKIPPED) +\]' "$out/interop.log" | sed 's/^/interop: /' | tee -a "$summary"
if [ $rc -ne 0 ]; then fails+=("interop tests rc=$rc"); fi
if grep -q '^\[  SKIPPED \]' "$out/interop.log"; then fails+=("interop tests skipped (no torch 2.x?)"); fi

# --- a tiny corpus and config ---------------------------------------------------------------------------
w=/tmp/torchstore_check
rm -rf "$w" && mkdir -p "$w"
"$PYTHON" - "$w/corpus.txt" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for d in range(200):
        for i in range(12):
            f.write(f"The count goes {i} then {i + 1}.\n")
        f.write("\n")
PY
"$LLMTRAIN_BIN" data prepare --input "$w/corpus.txt" --format text --out "$w/shards" --val-fraction 0.1 \
  >"$out/prepare.log" 2>&1 || fails+=("data prepare")
cat >"$w/tiny.yaml" <<YAML
run: {name: t, seed: 7, device: cpu, threads: 1, deterministic: true}
model: {n_layer: 2, n_head: 2, d_model: 32, block_size: 32, vocab_pad_multiple: 64}
trainer: {max_steps: 8, micro_batch_size: 4, grad_accum_steps: 1, lr: 3.0e-3, min_lr: 3.0e-4, warmup_steps: 2,
          log_every_steps: 1, eval_every_steps: 0, save_every_steps: 2, keep_last: 2}
data: {train_shards: $w/shards/train_*.bin, val_shards: $w/shards/val_*.bin}
output: {root_dir: $w/runs}
YAML
train=("$LLMTRAIN_BIN" train --config "$w/tiny.yaml")
free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# "step N loss X" lines of a log
losses() {
  grep -oE 'step +[0-9]+/[0-9]+ \| loss [0-9.]+' "$1" | sed -E 's#step +([0-9]+)/[0-9]+ \| loss #step \1 loss #'
}
run() {  # name, then the command; logs to $out/name.log
  local name=$1; shift
  say "\$ $*"
  timeout 300 "$@" >"$out/$name.log" 2>&1
  local rc=$?
  say "$name: rc=$rc, $(losses "$out/$name.log" | wc -l) steps logged"
  [ $rc -eq 0 ] || fails+=("$name rc=$rc")
}

# --- (d) the reference: llmtrain launch ------------------------------------------------------------------
run launch "$LLMTRAIN_BIN" launch --standalone --nproc-per-node 2 -- train --config "$w/tiny.yaml" \
  --set output.run_id=launch
# --- (b) torchrun --standalone -----------------------------------------------------------------------------
run standalone "$TORCHRUN" --standalone --nproc-per-node 2 --no-python "${train[@]}" --set output.run_id=standalone
# --- (c) two "nodes", c10d rendezvous ----------------------------------------------------------------------
port=$(free_port)
say "\$ (x2, in parallel) $TORCHRUN --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d" \
  "--rdzv-endpoint 127.0.0.1:$port --rdzv-id two --no-python ${train[*]} --set output.run_id=two-nodes"
for n in 0 1; do
  timeout 300 "$TORCHRUN" --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" \
    --rdzv-id two --no-python "${train[@]}" --set output.run_id=two-nodes >"$out/node$n.log" 2>&1 &
  pids[$n]=$!
done
for n in 0 1; do wait "${pids[$n]}" || fails+=("two-nodes node $n rc=$?"); done
cat "$out/node0.log" "$out/node1.log" >"$out/two-nodes.log"
say "two-nodes: $(losses "$out/two-nodes.log" | wc -l) steps logged"
# --- (e) static rendezvous (agent store), then --max-restarts with a killed worker -------------------------
port=$(free_port)
run static "$TORCHRUN" --nnodes 1 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$port" \
  --no-python "${train[@]}" --set output.run_id=static
grep -q "torchrun agent's store" "$out/static.log" || fails+=("static: workers did not report the agent's store")
port=$(free_port)
say "\$ $TORCHRUN --nnodes 1 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port $port --max-restarts 1" \
  "--no-python ${train[*]} --set output.run_id=restart --set trainer.max_steps=40 --resume auto" \
  "  (one worker killed after step_4)"
timeout 300 "$TORCHRUN" --nnodes 1 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$port" --max-restarts 1 \
  --no-python "${train[@]}" --set output.run_id=restart --set trainer.max_steps=40 --resume auto \
  >"$out/restart.log" 2>&1 &
agent=$!
for _ in $(seq 1 1200); do [ -d "$w/runs/restart/checkpoints/step_4" ] && break; sleep 0.1; done
# A worker: its command line runs the llmtrain binary (the agent's runs python with torchrun; comm can be
# the dynamic loader's name when the binary is started through it, so the command line decides).
victim=$(pgrep -f "output.run_id=restart" | while read -r p; do
  tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -q -e torchrun -e python || echo "$p"; done | tail -1)
say "restart: killing worker pid ${victim:-none}"
[ -n "$victim" ] && kill -9 "$victim"
wait $agent
rc=$?
say "restart: rc=$rc, last step: $(losses "$out/restart.log" | tail -1)"
[ $rc -eq 0 ] || fails+=("restart rc=$rc")
grep -q "restart 1" "$out/restart.log" || fails+=("restart: no worker reported restart 1")
losses "$out/restart.log" | tail -1 | grep -q "^step 40 " || fails+=("restart: did not reach step 40")

# --- step-for-step comparison against launch --------------------------------------------------------------
losses "$out/launch.log" >"$out/launch.losses"
[ "$(wc -l <"$out/launch.losses")" -eq 8 ] || fails+=("launch logged $(wc -l <"$out/launch.losses") steps, not 8")
for name in standalone two-nodes static; do
  losses "$out/$name.log" | sort -u -t' ' -k2,2n >"$out/$name.losses"
  if [ -s "$out/$name.losses" ] && diff "$out/launch.losses" "$out/$name.losses" >"$out/$name.diff"; then
    say "$name vs launch: identical losses at all $(wc -l <"$out/launch.losses") steps"
  else
    say "$name vs launch: DIFFER"; sed 's/^/  /' "$out/$name.diff" | tee -a "$summary"
    fails+=("$name losses differ from launch")
  fi
done
paste "$out/launch.losses" "$out/standalone.losses" | sed 's/^/launch | standalone: /' | tee -a "$summary"

if [ ${#fails[@]} -eq 0 ]; then
  say "torchstore_check: PASS"
else
  say "torchstore_check: FAIL (${fails[*]})"
  exit 1
fi
