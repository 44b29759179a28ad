#!/bin/bash
# pod_sandbox.sh: the node side of tests/k8s/job_harness.h — runs one "pod" the way a container runtime
# would: its own network namespace on a private bridge (own IP, eth0, /etc/hosts through
# /etc/netns/<ns>/hosts as ip-netns(8) binds it), its own UTS (hostname), PID (the command is PID 1;
# killing the pod kills everything in it) and mount namespace (the host's root filesystem under a tmpfs
# overlay as the container's writable layer, the pod's volumes bound at their mountPaths), then chroot, the
# pod's uid/gid/supplementary groups (setpriv) and exactly the pod's environment (env -i).
# With --image, the container is instead `podman --runtime runc run` of that image joined to the pod's
# network namespace (--network ns:/run/netns/<ns>), named like the namespace so it can be killed and removed.
#
#   pod_sandbox.sh bridge ID [--podman]
#       Creates bridge lk<ID>, prints "ready", then waits for EOF on stdin (the test process holding the
#       pipe: it closes when the test ends, however it ends) or a signal, and removes every namespace
#       llmk-<ID>-* with its processes, veths and /etc/netns directory, and the bridge; with --podman
#       first every container llmk-<ID>-* (podman rm -f).
#   pod_sandbox.sh pod ID N IP/PREFIX HOSTS_FILE [--image IMAGE] [--hostname H] [--uid U --gid G --groups G1,G2]
#                  [--mount SRC:DST:ro|rw]... [--env K=V]... -- COMMAND [ARGS...]
#       Runs pod number N (namespace llmk-<ID>-<N>, veth kv<ID><N>) on bridge lk<ID>. HOSTS_FILE is bound
#       as the pod's /etc/hosts (a shared file: rewriting it in place is a DNS update). COMMAND is looked
#       up with the --env PATH. Exit status: the command's, 128+signal when it was killed (what the
#       kubelet reports as the container's exit code). The namespace (and container) is removed when it ends.
#   pod_sandbox.sh signal ID N SIG [--podman]
#       SIGKILL: kills every process of pod N (the container runtime killing the container's cgroup);
#       another signal goes to the pod's PID 1 only (what the kubelet sends on deletion: SIGTERM). With
#       --podman also (SIGKILL) or instead (another signal) `podman kill` of container llmk-<ID>-<N>.
# Exit 77 with "SKIP: reason" (bridge mode) where the kernel refuses the namespaces (or not root). Needs root,
# iproute2, util-linux (unshare, setpriv), coreutils' chroot; podman and runc for --image.
set -u

mode=${1:-}
shift || true

ns_of() { echo "llmk-$1-$2"; }
PODMAN=(podman --runtime runc)

# The container options of `pod` (after ID N IP HOSTS_FILE) into image, hostname_, uid, gid, groups,
# mounts, envs, and the command line into cmd.
parse_container_opts() {
    image=""; hostname_=""; uid=""; gid=""; groups=""; mounts=(); envs=(); cmd=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --image) image=$2; shift 2 ;;
            --hostname) hostname_=$2; shift 2 ;;
            --uid) uid=$2; shift 2 ;;
            --gid) gid=$2; shift 2 ;;
            --groups) groups=$2; shift 2 ;;
            --mount) mounts+=("$2"); shift 2 ;;
            --env) envs+=("$2"); shift 2 ;;
            --) shift; break ;;
            *) echo "pod_sandbox.sh: unknown container option $1" >&2; exit 1 ;;
        esac
    done
    [ $# -gt 0 ] || { echo "pod_sandbox.sh: no command" >&2; exit 1; }
    cmd=("$@")
}

# The pod's container from $image (parse_container_opts) as Kubernetes would run it: --network joins the
# pod's namespace, --no-hosts + the bind give it the pod's /etc/hosts, --unsetenv-all + -e make the
# environment exactly the pod's (the harness passes the image's ENV first, as the kubelet's env is), the
# manifest's command replaces the ENTRYPOINT (and with it the image's CMD, as Kubernetes does), --pull
# never: the image must be on the node already (no registry here). Ulimits as deploy/image/build.sh sets
# them: runc fails to raise a limit past this shell's hard limit.
run_podman() {
    local name=$1 netns=$2 hosts=$3
    local nofile
    nofile=$(ulimit -Hn)
    if [ "$nofile" = unlimited ] || [ "$nofile" -gt 65536 ]; then nofile=65536; fi
    local run=("${PODMAN[@]}" run --rm --pull never --name "$name" --network "ns:$netns" --no-hosts
        -v "$hosts:/etc/hosts:ro" --unsetenv-all --ulimit "nofile=$nofile:$nofile" --ulimit nproc=32768:32768)
    [ -n "$hostname_" ] && run+=(--hostname "$hostname_")
    if [ -n "$uid" ]; then
        run+=(--user "$uid:${gid:-$uid}")
        local g
        for g in ${groups//,/ }; do run+=(--group-add "$g"); done
    fi
    local m src dst ro
    for m in "${mounts[@]}"; do
        IFS=: read -r src dst ro <<<"$m"
        if [ "$ro" = ro ]; then run+=(-v "$src:$dst:ro"); else run+=(-v "$src:$dst"); fi
    done
    local e
    for e in "${envs[@]}"; do run+=(-e "$e"); done
    local entry=${cmd[0]//\\/\\\\}
    entry=${entry//\"/\\\"}
    run+=(--entrypoint "[\"$entry\"]" "$image" "${cmd[@]:1}")
    "${run[@]}"
}

case "$mode" in
bridge)
    id=$1
    podman_=${2:-}
    bridge="lk$id"
    [ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root (running as uid $(id -u))"; exit 77; }
    # Missing tools are a broken setup, not a kernel that refuses namespaces: fail, do not skip.
    for tool in ip unshare setpriv chroot; do
        command -v $tool >/dev/null ||
            { echo "pod_sandbox.sh: $tool is not installed (iproute2, util-linux, coreutils)"; exit 1; }
    done
    if [ "$podman_" = --podman ]; then
        for tool in podman runc; do
            command -v $tool >/dev/null ||
                { echo "SKIP: $tool is not installed (scripts/setup.sh installs podman, runc)"; exit 77; }
        done
    fi
    cleanup() {
        trap '' INT TERM
        if [ "$podman_" = --podman ]; then
            for c in $("${PODMAN[@]}" ps -a --format '{{.Names}}' 2>/dev/null | grep "^llmk-$id-"); do
                "${PODMAN[@]}" rm -f --time 0 "$c" >/dev/null 2>&1
            done
        fi
        for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^llmk-$id-"); do
            for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
            ip netns del "$ns" 2>/dev/null
            rm -rf "/etc/netns/$ns"
        done
        for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^kv$id"); do
            ip link del "$l" 2>/dev/null
        done
        ip link del "$bridge" 2>/dev/null
    }
    probe="llmk-$id-probe"
    if ! err=$(ip netns add "$probe" 2>&1); then echo "SKIP: the kernel refuses network namespaces: $err"; exit 77; fi
    ip netns del "$probe"
    if ! unshare --mount --uts --pid --fork true 2>/dev/null; then
        echo "SKIP: the kernel refuses mount/UTS/PID namespaces"; exit 77
    fi
    trap cleanup EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    ip link add "$bridge" type bridge || { echo "pod_sandbox.sh: cannot create bridge $bridge" >&2; exit 1; }
    ip link set "$bridge" up || exit 1
    echo ready
    # Wait for EOF on stdin (the test's end); `read` returns non-zero at EOF.
    while read -r _; do :; done
    exit 0
    ;;

signal)
    id=$1 n=$2 sig=$3
    ns=$(ns_of "$id" "$n")
    pids=$(ip netns pids "$ns" 2>/dev/null)
    if [ "$sig" = KILL ] || [ "$sig" = 9 ]; then
        # At once (a podman call takes a while under load); then podman's own kill for a container whose
        # processes were not all in the namespace yet.
        for p in $pids; do kill -KILL "$p" 2>/dev/null; done
        [ "${4:-}" = --podman ] && "${PODMAN[@]}" kill --signal KILL "$ns" >/dev/null 2>&1
    elif [ "${4:-}" = --podman ]; then
        "${PODMAN[@]}" kill --signal "$sig" "$ns" >/dev/null 2>&1
    else
        # PID 1 of the pod's PID namespace: the last NSpid field is 1.
        for p in $pids; do
            if grep -qE '^NSpid:.*[[:space:]]1$' "/proc/$p/status" 2>/dev/null; then kill -"$sig" "$p"; fi
        done
    fi
    exit 0
    ;;

pod)
    id=$1 n=$2 cidr=$3 hosts_file=$4
    shift 4
    ns=$(ns_of "$id" "$n")
    veth="kv$id$n" peer="kp$id$n"
    args=("$@")
    parse_container_opts "$@"
    child=""
    cleanup() {
        local rc=$?
        trap '' INT TERM
        if [ -n "$image" ]; then
            # The container outlives a killed `podman run` (conmon keeps it): remove it by name.
            [ -n "$child" ] && kill -KILL "$child" 2>/dev/null
            "${PODMAN[@]}" rm -f --time 0 "$ns" >/dev/null 2>&1
        fi
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
        ip link del "$veth" 2>/dev/null
        rm -rf "/etc/netns/$ns"
        exit $rc
    }
    trap cleanup EXIT
    trap 'exit 143' TERM
    trap 'exit 130' INT
    fail() { echo "pod_sandbox.sh: pod $n: $*" >&2; exit 1; }
    ip netns add "$ns" || fail "ip netns add $ns"
    mkdir -p "/etc/netns/$ns"
    ln -s "$(realpath "$hosts_file")" "/etc/netns/$ns/hosts"
    ip link add "$veth" type veth peer name "$peer" || fail "veth $veth"
    ip link set "$veth" master "lk$id" up || fail "attach $veth to lk$id"
    ip link set "$peer" netns "$ns" || fail "move $peer into $ns"
    ip -n "$ns" link set "$peer" name eth0 || fail "rename $peer"
    ip -n "$ns" addr add "$cidr" dev eth0 || fail "address $cidr"
    ip -n "$ns" link set eth0 up || fail "eth0 up"
    ip -n "$ns" link set lo up || fail "lo up"
    if [ -n "$image" ]; then
        run_podman "$ns" "/run/netns/$ns" "$(realpath "$hosts_file")" &
        child=$!
        wait "$child"
        rc=$?
        child=""
        exit $rc
    fi
    root=$(mktemp -d /tmp/llmk-root.XXXXXX)
    # --kill-child: if this script dies, the pod's PID 1 gets SIGKILL, and with it the whole PID namespace.
    ip netns exec "$ns" unshare --mount --uts --pid --fork --kill-child --propagation private \
        bash "$0" _container "$root" "${args[@]}" &
    child=$!
    wait "$child"
    rc=$?
    rmdir "$root" 2>/dev/null
    exit $rc
    ;;

_container)
    # PID 1 of the pod; its own mount and UTS namespaces. Builds the root, then execs the command.
    root=$1
    shift
    parse_container_opts "$@"
    fail() { echo "pod_sandbox.sh: container: $*" >&2; exit 1; }
    [ -n "$hostname_" ] && { hostname "$hostname_" || fail "hostname $hostname_"; }

    # The container's root: an overlay whose lower layer is the host's root filesystem and whose upper
    # layer is a tmpfs (the container's writable layer, gone with the pod), so mount points can be made
    # for the volumes without touching the host. Mounts below / are not part of an overlay's lower layer:
    # bind each top-level one again (the /etc/hosts that ip-netns(8) bound is one of them), mount /proc new.
    mount -t tmpfs -o mode=0755 pod-layer "$root" || fail "tmpfs at $root"
    mkdir "$root/upper" "$root/work" "$root/merged"
    mount -t overlay pod-root -o "lowerdir=/,upperdir=$root/upper,workdir=$root/work" "$root/merged" ||
        fail "overlay root at $root/merged"
    tops=()
    while read -r _ _ _ _ mp _; do
        [[ $mp == *\\* ]] && mp=$(printf '%b' "$mp")  # mountinfo octal-escapes spaces (\040)
        tops+=("$mp")
    done </proc/self/mountinfo
    is_top() {  # no other mount point (but /) is an ancestor
        local p=$1 q
        for q in "${tops[@]}"; do
            [ "$q" = / ] || [ "$q" = "$p" ] && continue
            case "$p" in "$q"/*) return 1 ;; esac
        done
        return 0
    }
    for mp in "${tops[@]}"; do
        [ "$mp" = / ] && continue
        case "$mp" in "$root" | "$root"/*) continue ;; esac
        is_top "$mp" || continue
        if [ "$mp" = /proc ]; then
            mount -t proc proc "$root/merged/proc" || fail "proc"
        elif [ -d "$mp" ]; then
            mount --rbind "$mp" "$root/merged$mp" || fail "bind $mp"
        else
            mount --bind "$mp" "$root/merged$mp" || fail "bind $mp"
        fi
    done
    root=$root/merged
    for m in "${mounts[@]}"; do
        IFS=: read -r src dst ro <<<"$m"
        if [ -d "$src" ]; then mkdir -p "$root$dst"; else mkdir -p "$(dirname "$root$dst")"; touch "$root$dst"; fi
        mount --bind "$src" "$root$dst" || fail "bind $src at $dst"
        if [ "$ro" = ro ]; then mount -o remount,bind,ro "$root$dst" || fail "read-only $dst"; fi
    done
    priv=()
    if [ -n "$uid" ]; then
        priv=(setpriv --reuid "$uid" --regid "${gid:-$uid}")
        if [ -n "$groups" ]; then priv+=(--groups "$groups"); else priv+=(--clear-groups); fi
    fi
    exec chroot "$root" "${priv[@]}" env -i "${envs[@]}" "${cmd[@]}"
    ;;

*)
    sed -n '2,27p' "$0" >&2
    exit 2
    ;;
esac
