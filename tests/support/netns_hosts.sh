#!/bin/bash
# netns_hosts.sh: run one command on N "hosts" made of Linux network namespaces on a private bridge, each
# with its own IP, hostname (a UTS namespace) and /etc/hosts (ip-netns(8): /etc/netns/<ns>/hosts), then
# remove every namespace, veth, bridge and /etc/netns directory whatever happens (trap EXIT).
#
# usage: netns_hosts.sh [-n HOSTS] [-t TIMEOUT_S] [-p PREFIX] [-a ALIAS_FMT]... [-r RATE] [--] COMMAND...
#   -n HOSTS      number of hosts (default 2), named PREFIX-0 .. PREFIX-<n-1>
#   -t TIMEOUT_S  per-host time limit (default 120); then SIGTERM, and SIGKILL 5 s later
#   -p PREFIX     host name prefix (default "host")
#   -a ALIAS_FMT  extra /etc/hosts name per host, printf format with the index, e.g. 'job-%d.job-svc'
#                 (repeatable; for Kubernetes-style DNS names)
#   -r RATE       shape each host's outgoing link to RATE (tc tbf, e.g. 1gbit), like a NIC of that speed;
#                 default: unshaped (veth at memory speed)
#   COMMAND       run with bash -c in every host at once (several words are joined with spaces, as ssh does).
#                 Quote it so that variables expand inside the host:
#                   NETNS_HOST_INDEX (0..n-1), NETNS_HOSTS (n), NETNS_HOST_NAME, NETNS_HOST_IP
# Output: each host's stdout and stderr, line by line, prefixed "[PREFIX-i] ", on stdout.
# Exit: 0 when every host's command exits 0; else the first failing host's code (by index);
#       77 (ctest's skip code) with a line "SKIP: reason" when network namespaces are unavailable here.
# Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN), iproute2 and util-linux's unshare.
# Example (two nodes of llmtrain launch, node rank from the hostname):
#   netns_hosts.sh -n 2 -- \
#     'llmtrain launch --nnodes 2 --master-addr host-0 --master-port 29500 -- train --config c.yaml'
set -u

hosts=2
timeout_s=120
prefix=host
aliases=()
rate=
while [ $# -gt 0 ]; do
    case "$1" in
        -n) hosts=$2; shift 2 ;;
        -t) timeout_s=$2; shift 2 ;;
        -p) prefix=$2; shift 2 ;;
        -a) aliases+=("$2"); shift 2 ;;
        -r) rate=$2; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        -*) echo "netns_hosts.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
done
if [ $# -eq 0 ]; then echo "netns_hosts.sh: no command given (see --help)" >&2; exit 2; fi
if ! [[ "$hosts" =~ ^[0-9]+$ ]] || [ "$hosts" -lt 1 ] || [ "$hosts" -gt 200 ]; then
    echo "netns_hosts.sh: -n must be 1..200, got '$hosts'" >&2; exit 2
fi
command="$*"

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root (running as uid $(id -u))"
command -v ip >/dev/null || skip "iproute2's ip is not installed"

# Unique per run (tests run in parallel): interface names must stay within 15 characters.
id=$(printf '%05x' $(( ($$ * 32768 + RANDOM) % 0xfffff )))
bridge="lb$id"
nss=()
work=$(mktemp -d /tmp/netns_hosts.XXXXXX)
pids=()

cleanup() {
    local rc=$?
    trap '' INT TERM
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
    for ns in "${nss[@]}"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
    done
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    for ns in "${nss[@]}"; do
        ip netns del "$ns" 2>/dev/null   # takes the namespace's veth end, and so the pair, with it
        rm -rf "/etc/netns/$ns"
    done
    for ((i = 0; i < ${#nss[@]}; i++)); do ip link del "lv$id$i" 2>/dev/null; done
    ip link del "$bridge" 2>/dev/null
    rm -rf "$work"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

probe="llmt-$id-probe"
if ! err=$(ip netns add "$probe" 2>&1); then skip "the kernel refuses network namespaces: $err"; fi
nss+=("$probe")
ip netns del "$probe"
nss=()

echo "netns_hosts.sh: run id $id (namespaces llmt-$id-*, bridge $bridge)"

fail_setup() { echo "netns_hosts.sh: setup failed: $*" >&2; exit 1; }
ip link add "$bridge" type bridge || fail_setup "cannot create bridge $bridge"
ip link set "$bridge" up || fail_setup "bridge $bridge up"

hosts_file="$work/hosts"
{
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    for ((i = 0; i < hosts; i++)); do
        line="10.213.$((i / 250)).$((i % 250 + 2)) $prefix-$i"
        for a in "${aliases[@]}"; do line+=" $(printf "$a" "$i")"; done
        echo "$line"
    done
} > "$hosts_file"

for ((i = 0; i < hosts; i++)); do
    ns="llmt-$id-$prefix-$i"
    ip netns add "$ns" || fail_setup "ip netns add $ns"
    nss+=("$ns")
    mkdir -p "/etc/netns/$ns"
    cp "$hosts_file" "/etc/netns/$ns/hosts"
    ip link add "lv$id$i" type veth peer name "lp$id$i" || fail_setup "veth lv$id$i"
    ip link set "lv$id$i" master "$bridge" up || fail_setup "attach lv$id$i to $bridge"
    ip link set "lp$id$i" netns "$ns" || fail_setup "move lp$id$i into $ns"
    ip -n "$ns" link set "lp$id$i" name eth0 || fail_setup "rename in $ns"
    ip -n "$ns" addr add "10.213.$((i / 250)).$((i % 250 + 2))/16" dev eth0 || fail_setup "address in $ns"
    ip -n "$ns" link set eth0 up || fail_setup "eth0 up in $ns"
    ip -n "$ns" link set lo up || fail_setup "lo up in $ns"
    if [ -n "$rate" ]; then
        ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 512kb latency 100ms ||
            fail_setup "tc tbf rate $rate on $ns's eth0"
    fi
done

# Every host at once; the cleanup finds whatever they leave through `ip netns pids`.
for ((i = 0; i < hosts; i++)); do
    ns="${nss[$i]}"
    name="$prefix-$i"
    ip_addr="10.213.$((i / 250)).$((i % 250 + 2))"
    (
        export NETNS_HOST_INDEX=$i NETNS_HOSTS=$hosts NETNS_HOST_NAME=$name NETNS_HOST_IP=$ip_addr NETNS_CMD="$command"
        # unshare --uts gives the host its own hostname; without UTS namespaces the hostname stays shared.
        if unshare --uts true 2>/dev/null; then
            inner='hostname "$NETNS_HOST_NAME" && exec bash -c "$NETNS_CMD"'
            runner=(unshare --uts bash -c "$inner")
        else
            echo "netns_hosts.sh: no UTS namespace; $name keeps the machine's hostname" >&2
            runner=(bash -c "$NETNS_CMD")
        fi
        timeout -k 5 "$timeout_s" ip netns exec "$ns" "${runner[@]}" < /dev/null > "$work/out.$i" 2>&1
        echo $? > "$work/rc.$i"
    ) &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

rc=0
for ((i = 0; i < hosts; i++)); do
    sed "s/^/[$prefix-$i] /" "$work/out.$i"
    r=$(cat "$work/rc.$i" 2>/dev/null || echo 1)
    if [ "$r" = 124 ]; then echo "netns_hosts.sh: $prefix-$i timed out after $timeout_s s"; fi
    if [ "$r" != 0 ]; then
        echo "netns_hosts.sh: $prefix-$i exited with $r"
        [ $rc = 0 ] && rc=$r
    fi
done
if [ $rc != 0 ] && [ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ]; then
    echo "netns_hosts.sh: hint: bridged traffic passes through iptables here (bridge-nf-call-iptables=1);" \
        "a DROP policy on FORWARD blocks the hosts from each other"
fi
exit $rc
