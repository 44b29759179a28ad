#!/usr/bin/env bash
# `make image`: builds the llmtrain CPU image with podman from the committed tree (git archive HEAD)
# on local Debian-package bases (make_bases.sh), then checks it: size, `llmtrain version`, and a few
# training steps of the tiny preset on data/shards/gpt2_corpus (`make data`) inside the container.
# podman runs with the runc runtime, explicit ulimits (the defaults come from a host file that may
# not exist in a container) and --network none for every RUN step and the smoke runs.
# Env: IMAGE_TAG (default localhost/llmtrain:latest), IMAGE_SMOKE=0 to skip the smoke runs.
set -euo pipefail
cd "$(dirname "$0")/../.."

TAG=${IMAGE_TAG:-localhost/llmtrain:latest}
# Limits must not exceed what this (possibly containerised) shell may set: runc fails with "error
# setting rlimit ...: operation not permitted" otherwise (seen here with nofile 65536 > hard 20000, and
# with nproc 65536 under a hard limit of 96364).
nofile=$(ulimit -Hn)
if [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; then nofile=65536; fi
nproc=${IMAGE_NPROC:-32768}
ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
PODMAN=(podman --runtime runc)
for tool in podman runc debootstrap git; do
  command -v "$tool" >/dev/null ||
    { echo "image: needs $tool (scripts/setup.sh installs podman buildah runc debootstrap)" >&2; exit 1; }
done
[ -f data/tokenizers/gpt2.tiktoken ] || bash scripts/setup.d/10-tokenizer.sh
[ -f web/dist/index.html ] || bash scripts/setup.d/50-web.sh

bash deploy/image/make_bases.sh all

# Build context: the committed sources (not other people's work in progress), the tokenizer file
# and the built dashboard (web/dist).
ctx=.cache/image/context
rm -rf "$ctx"
mkdir -p "$ctx/data/tokenizers"
git archive HEAD CMakeLists.txt CMakePresets.json cmake src configs | tar -x -C "$ctx"
cp data/tokenizers/gpt2.tiktoken "$ctx/data/tokenizers/"
mkdir -p "$ctx/web" && cp -r web/dist "$ctx/web/dist"

echo "image: building $TAG from $(git rev-parse --short=12 HEAD)" >&2
start=$(date +%s)
"${PODMAN[@]}" build --network none "${ULIMITS[@]}" --layers \
  --build-arg BUILD_BASE=localhost/llmtrain-build-base:bookworm \
  --build-arg RUNTIME_BASE=localhost/llmtrain-runtime-base:bookworm \
  --label "org.opencontainers.image.revision=$(git rev-parse HEAD)" \
  --build-arg GIT_SHA="$(git rev-parse --short=12 HEAD)" \
  -f deploy/Containerfile -t "$TAG" "$ctx"
bytes=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$TAG")
echo "image: $TAG built in $(( $(date +%s) - start )) s; size $(( bytes / 1000000 )) MB ($bytes bytes)" >&2

[ "${IMAGE_SMOKE:-1}" = 0 ] && exit 0
RUN=("${PODMAN[@]}" run --rm --network none "${ULIMITS[@]}")
"${RUN[@]}" "$TAG" version
"${RUN[@]}" --entrypoint /bin/sh "$TAG" -c 'test -f /usr/local/share/llmtrain/web/index.html' ||
  { echo "image: the dashboard is missing from /usr/local/share/llmtrain/web" >&2; exit 1; }
shards=data/shards/gpt2_corpus
if [ ! -f "$shards/manifest.json" ]; then
  echo "image: $shards missing (make data): skipping the training smoke run" >&2
  exit 0
fi
out=$(mktemp -d)
chown 10001:10001 "$out" 2>/dev/null || chmod 0777 "$out"
trap 'rm -rf "$out"' EXIT
"${RUN[@]}" -v "$PWD/data/shards:/data/shards:ro" -v "$out:/out" "$TAG" \
  train --config /usr/local/share/llmtrain/configs/presets/gpt2_tiny_cpu.yaml \
  --set trainer.max_steps=3 --set trainer.warmup_steps=1 --set trainer.eval_every_steps=0 \
  --set trainer.save_every_steps=3 \
  --set trainer.log_every_steps=1 --set output.root_dir=/out --set output.run_id=smoke \
  --set 'data.train_shards=/data/shards/gpt2_corpus/train_*.bin' \
  --set 'data.val_shards=/data/shards/gpt2_corpus/val_*.bin'
test -f "$out/smoke/summary.json" && echo "image: training smoke run wrote $(ls "$out/smoke" | tr '\n' ' ')" >&2
