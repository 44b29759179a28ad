#!/usr/bin/env bash
# make test-fresh: the README's two commands (`make run`, `make test`) in a new Debian 12 root, as a
# new user on a new machine would run them. Catches what a developer's machine hides: a package that
# was installed by hand, a build step that only works on a second try.
#
# The root is made by debootstrap (minbase, plus `make`: the README's commands need it to start) with
# the host's apt sources, so setup.sh reaches the same archive. A clean `git archive` of HEAD (or of
# FRESH_REV) goes to /root/llmtrain, and ../shared (the reference data the tests read) beside it read-only, as
# CI has it.
# The commands run as root under chroot inside new mount and PID namespaces, with the root itself, /proc,
# /sys, /dev, /dev/shm and /run mounted (the netns and Chromium tests need them) and the machine's CUDA
# toolkit bind-mounted read-only at /usr/local/cuda (it is not a Debian package; the build compiles the
# CUDA code with it). When the namespaces end, every mount and process in them ends too.
#
# Cached between runs under .cache/fresh/: debootstrap's and apt's .deb files (downloads only; every
# package is still installed into the new root) and, unless FRESH_CCACHE=0, a compiler cache (ccache is
# then installed into the root after the base and set as CMake's compiler launcher; it provides no
# library or header, so it cannot hide a missing dependency). FRESH_KEEP=1 keeps the root afterwards.
# FRESH_MAX_STEPS (default 20) shortens the training of `make run`; FRESH_REV (default HEAD) picks the
# commit to test, FRESH_DIR (default .cache/fresh) the cache. Two runs at once need two FRESH_DIRs (apt
# locks the shared .deb cache).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

SUITE=bookworm
CACHE=${FRESH_DIR:-$REPO/.cache/fresh}
REV=${FRESH_REV:-HEAD}
MAX_STEPS=${FRESH_MAX_STEPS:-20}
USE_CCACHE=${FRESH_CCACHE:-1}

die() { echo "test-fresh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mounts); run it as root or with sudo"
command -v debootstrap >/dev/null || die "debootstrap is missing; run scripts/setup.sh"
command -v unshare >/dev/null || die "unshare (util-linux) is missing"
git rev-parse --verify -q "$REV^{commit}" >/dev/null ||
  die "not a git checkout or no commit $REV (it tests a git archive)"
if [ "$REV" = HEAD ] && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "test-fresh: note: uncommitted changes are not tested (it copies a git archive of HEAD)" >&2
fi

mkdir -p "$CACHE/debootstrap" "$CACHE/apt-archives/partial" "$CACHE/ccache"
ROOT=$(mktemp -d /var/tmp/llmt-fresh.XXXXXX)

# Removes the root; --one-file-system never follows a mount that somehow outlived the namespace.
cleanup() {
  local rc=$?
  if findmnt -rn -o TARGET | grep -q "^$ROOT"; then
    echo "test-fresh: mounts under $ROOT still exist; leaving it in place" >&2
  elif [ "${FRESH_KEEP:-0}" = 1 ]; then
    echo "test-fresh: kept the root at $ROOT" >&2
  else
    rm -rf --one-file-system "$ROOT"
  fi
  exit $rc
}
trap cleanup EXIT

# Seconds since $1 (from `date +%s`), printed as minutes and seconds.
elapsed() { local s=$(( $(date +%s) - $1 )); printf '%dm%02ds (%d s)' $((s / 60)) $((s % 60)) "$s"; }

mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}

t0=$(date +%s)
echo "== debootstrap $SUITE (minbase) into $ROOT from $mirror"
debootstrap --variant=minbase --include=make --cache-dir="$CACHE/debootstrap" \
  "$SUITE" "$ROOT" "$mirror" >"$ROOT.debootstrap.log" 2>&1 \
  || { tail -20 "$ROOT.debootstrap.log" >&2; die "debootstrap failed (log: $ROOT.debootstrap.log)"; }
rm -f "$ROOT.debootstrap.log"
echo "   done in $(elapsed "$t0")"

# The same apt sources as this machine (main, updates, security), name resolution, a hostname.
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  rm -f "$ROOT/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/debian.sources "$ROOT/etc/apt/sources.list.d/debian.sources"
fi
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# This workplace's machines reach the package registries through a TLS proxy whose CA every machine
# trusts from its first boot: the certificates in /usr/local/share/ca-certificates (made part of
# /etc/ssl/certs/ca-certificates.crt when setup.sh installs ca-certificates), /etc/npmrc's cafile and the
# *_CA_* / SSL_CERT_* variables. They are the machine's, not a package a user installs, so they are
# copied; without them npm fails with SELF_SIGNED_CERT_IN_CHAIN.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
fi
if [ -f /etc/npmrc ]; then cp /etc/npmrc "$ROOT/etc/npmrc"; fi
ca_env=()
for v in NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR CURL_CA_BUNDLE GIT_SSL_CAINFO REQUESTS_CA_BUNDLE; do
  if [ -n "${!v:-}" ]; then ca_env+=("$v=${!v}"); fi
done
echo llmt-fresh >"$ROOT/etc/hostname"
printf '127.0.0.1 localhost llmt-fresh\n::1 localhost ip6-localhost ip6-loopback\n' >"$ROOT/etc/hosts"
mkdir -p "$ROOT/usr/local/cuda" "$ROOT/root/llmtrain" "$ROOT/root/.ccache"

git archive --format=tar "$REV" | tar -x -C "$ROOT/root/llmtrain"
# The reference data (tokenizer ids, schemas) that the tests read from ../shared, laid beside the
# checkout read-only, as CI lays it.
if [ -d "$REPO/../shared" ]; then
  cp -a "$REPO/../shared" "$ROOT/root/shared"
  chmod -R a-w "$ROOT/root/shared"
fi
echo "== copied git archive of $(git rev-parse --short "$REV") to /root/llmtrain"

# The script that runs inside the root. Only `make run` and `make test` are the user's commands; the
# rest is the harness (timing, the compiler cache).
cat >"$ROOT/root/fresh_commands.sh" <<EOF
#!/bin/bash
set -euo pipefail
cd /root/llmtrain
elapsed() { local s=\$(( \$(date +%s) - \$1 )); printf '%dm%02ds (%d s)' \$((s / 60)) \$((s % 60)) "\$s"; }
if [ "$USE_CCACHE" = 1 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ccache >/dev/null
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  export CCACHE_DIR=/root/.ccache CCACHE_BASEDIR=/root/llmtrain CCACHE_MAXSIZE=10G
fi
t=\$(date +%s)
echo "== make run (MAX_STEPS=$MAX_STEPS)"
MAX_STEPS=$MAX_STEPS make run
echo "== make run: ok in \$(elapsed \$t)"
t=\$(date +%s)
echo "== make test"
make test
echo "== make test: ok in \$(elapsed \$t)"
EOF
chmod +x "$ROOT/root/fresh_commands.sh"

# Inside new mount and PID namespaces: mount what a booted machine has, then chroot. PATH and the rest
# of the environment are a login's, not this shell's.
inner=$(cat <<EOF
set -euo pipefail
R="$ROOT"
# The root is a mount point of its own, as / is on a booted machine (ip netns exec remounts / rslave).
mount --bind "\$R" "\$R"
# Its own hostname, the one its /etc/hosts resolves (a UTS namespace): a booted Debian resolves its own
# name from /etc/hosts, and torchrun's c10d rendezvous looks it up; with this machine's name (not in the
# root's /etc/hosts) the lookup went to DNS and the two torchrun tests hung for their 300 s.
hostname llmt-fresh
mount -t proc proc "\$R/proc"
mount --rbind /sys "\$R/sys" && mount --make-rslave "\$R/sys"
mount --rbind /dev "\$R/dev" && mount --make-rslave "\$R/dev"
mount -t tmpfs -o mode=1777,size=8g tmpfs "\$R/dev/shm"
mount -t tmpfs -o mode=755 tmpfs "\$R/run"
mount --bind "$CACHE/apt-archives" "\$R/var/cache/apt/archives"
mount --bind "$CACHE/ccache" "\$R/root/.ccache"
if [ -d /usr/local/cuda/bin ]; then
  mount --bind /usr/local/cuda "\$R/usr/local/cuda" && mount -o remount,bind,ro "\$R/usr/local/cuda"
fi
exec chroot "\$R" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash TERM=dumb \
  LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin ${ca_env[*]} \
  /bin/bash /root/fresh_commands.sh
EOF
)
t1=$(date +%s)
set +e
unshare --mount --pid --uts --fork --propagation private /bin/bash -c "$inner" 2>&1 | tee "$CACHE/last.log"
rc=${PIPESTATUS[0]}
set -e
echo "== test-fresh: both commands $([ "$rc" = 0 ] && echo ok || echo FAILED, exit $rc) in $(elapsed "$t1");" \
  "with debootstrap $(elapsed "$t0") (log: $CACHE/last.log)"
exit "$rc"
