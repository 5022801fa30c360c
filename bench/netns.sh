#!/bin/bash
# netns.sh: run a command while N network namespaces, joined by shaped links, exist.
#
#   bench/netns.sh [-n N] [-r RATE] [-q tbf|htb] [-t SECONDS] [-s SUBNET] -- CMD [ARGS...]
#   bench/netns.sh --cleanup PREFIX [-n N]
#
# A cluster of N hosts on this machine: namespaces <P>0 .. <P>N-1 and a switch namespace <P>sw
# holding a bridge. Host k has device veth0 with address SUBNET.(k+1)/24, paired with port p<k>
# on the bridge. Every link is shaped on both ends (egress of veth0 and of p<k>), by default
# with a token bucket,
#     tc qdisc add dev ... root tbf rate RATE burst B latency 50ms
# (B = the bytes of 5 ms at RATE, at least 64 KiB), or with -q htb by one HTB class
#     tc qdisc add dev ... root handle 1: htb default 10
#     tc class add dev ... parent 1: classid 1:10 htb rate RATE ceil RATE burst B
# (RATE 1gbit by default; a ring allreduce reaches 95 % of it, 0.119 GB/s busbw; -r none
# leaves the links unshaped). netem is not available in this kernel, so no delay or
# loss is added. bench/calibrate.sh measures what the links carry (iperf3, ping-pong).
#
# P is a prefix unique to this run ("cpn<pid>x"), so nothing that this script did not create is
# ever touched. On start it removes what an earlier run left behind after a SIGKILL: the
# namespaces named cpn<pid>x... whose pid is no longer alive. CMD runs in the root namespace with
#     NETNS_PREFIX=P  NETNS_COUNT=N  NETNS_ADDR_TEMPLATE=SUBNET.{k+1}  NETNS_DEV=veth0
# so that for example
#     bench/netns.sh -- sh -c 'build/tools/collective-launch --nodes $NETNS_COUNT \
#         --ranks-per-node 1 --netns-prefix $NETNS_PREFIX --netns-addr $NETNS_ADDR_TEMPLATE \
#         -- build/bench/coll-perf -b 4K -e 64M'
# runs one daemon per namespace. Everything created is deleted when the script exits, however it
# exits (trap on EXIT, INT, TERM, HUP); CMD is bounded by -t seconds (default 1800, then SIGTERM,
# SIGKILL 10 s later) and every ip/tc call by 10 s. --cleanup PREFIX removes what a run with that
# prefix left behind (after a SIGKILL) and is harmless when there is nothing to remove.
#
# Exit status: CMD's, or 1 when the set-up failed, 2 on a usage error. Needs root and iproute2.
set -u

N=4
RATE=1gbit
QDISC=tbf
LIMIT_S=1800
SUBNET=10.9.0
PREFIX="cpn$$x"
CLEANUP_ONLY=0
STEP_S=10

usage() {
    sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'
}

die() {
    echo "netns.sh: $*" >&2
    exit 1
}

while [ $# -gt 0 ]; do
    case $1 in
    -n) N=${2:?}; shift 2 ;;
    -r) RATE=${2:?}; shift 2 ;;
    -q) QDISC=${2:?}; shift 2 ;;
    -t) LIMIT_S=${2:?}; shift 2 ;;
    -s) SUBNET=${2:?}; shift 2 ;;
    --cleanup) PREFIX=${2:?}; CLEANUP_ONLY=1; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "netns.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    esac
done
case $N in '' | *[!0-9]*) echo "netns.sh: -n wants a number" >&2; exit 2 ;; esac
if [ "$N" -lt 1 ] || [ "$N" -gt 250 ]; then
    echo "netns.sh: -n must be 1..250" >&2
    exit 2
fi
if [ $CLEANUP_ONLY = 0 ] && [ $# -eq 0 ]; then
    echo "netns.sh: no command given after --" >&2
    exit 2
fi
case $QDISC in tbf | htb) ;; *) echo "netns.sh: -q wants tbf or htb" >&2; exit 2 ;; esac
case $RATE in none | [0-9]*bit) ;; *) echo "netns.sh: -r wants a rate like 1gbit or none" >&2; exit 2 ;; esac
if ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    die "needs ip and tc (Debian iproute2)"
fi

# Our namespaces only: <P>0..<P>N-1 and <P>sw.
our_namespaces() {
    local k
    for ((k = 0; k < N; k++)); do echo "$PREFIX$k"; done
    echo "${PREFIX}sw"
}

exists() { [ -e "/run/netns/$1" ]; }

cleanup() {
    local ns
    for ns in $(our_namespaces); do
        if exists "$ns"; then
            timeout $STEP_S ip netns del "$ns" || echo "netns.sh: could not delete $ns" >&2
        fi
    done
}

if [ $CLEANUP_ONLY = 1 ]; then
    cleanup
    exit 0
fi

# The namespaces of earlier runs whose script is gone (killed before its trap ran): cpn<pid>x*
# with no process <pid>. At most the namespaces that exist, each deletion bounded.
remove_leftovers() {
    local ns pid
    for ns in $(timeout $STEP_S ip netns list | awk '{print $1}' | grep -E '^cpn[0-9]+x'); do
        pid=${ns#cpn}
        pid=${pid%%x*}
        if [ "$pid" != $$ ] && ! kill -0 "$pid" 2>/dev/null; then
            echo "netns.sh: removing $ns, left by an earlier run (pid $pid)" >&2
            timeout $STEP_S ip netns del "$ns" || echo "netns.sh: could not delete $ns" >&2
        fi
    done
}

# Token-bucket bytes: 5 ms at RATE, at least 64 KiB.
burst_bytes() {
    local bits
    bits=$(echo "$RATE" | awk '{ v = $0 + 0; u = substr($0, length(v) + 1, 1);
        m = u == "k" ? 1e3 : u == "m" ? 1e6 : u == "g" ? 1e9 : 1; printf "%d", v * m }')
    awk -v b="$bits" 'BEGIN { x = b / 8 * 0.005; printf "%d", x < 65536 ? 65536 : x }'
}

# shape NS DEV: the link's egress on DEV in namespace NS.
shape() {
    local burst
    burst=$(burst_bytes)
    if [ "$QDISC" = htb ]; then
        run tc -n "$1" qdisc add dev "$2" root handle 1: htb default 10
        run tc -n "$1" class add dev "$2" parent 1: classid 1:10 htb rate "$RATE" ceil "$RATE" \
            burst "$burst" cburst "$burst"
    else
        run tc -n "$1" qdisc add dev "$2" root tbf rate "$RATE" burst "$burst" latency 50ms
    fi
}

# Bounded ip/tc call that names what failed.
run() {
    timeout $STEP_S "$@" || die "failed: $*"
}

setup() {
    local sw="${PREFIX}sw" k ns
    for ns in $(our_namespaces); do
        exists "$ns" && die "namespace $ns exists already; not touching it"
    done
    run ip netns add "$sw"
    run ip -n "$sw" link add br0 type bridge
    run ip -n "$sw" link set br0 up
    for ((k = 0; k < N; k++)); do
        ns="$PREFIX$k"
        run ip netns add "$ns"
        run ip link add veth0 netns "$ns" type veth peer name "p$k" netns "$sw"
        run ip -n "$ns" addr add "$SUBNET.$((k + 1))/24" dev veth0
        run ip -n "$ns" link set lo up
        run ip -n "$ns" link set veth0 up
        run ip -n "$sw" link set "p$k" master br0
        run ip -n "$sw" link set "p$k" up
        if [ "$RATE" != none ]; then
            shape "$ns" veth0
            shape "$sw" "p$k"
        fi
    done
    # Every namespace reaches the first one (when ping is installed; iputils-ping).
    command -v ping >/dev/null || return 0
    for ((k = 1; k < N; k++)); do
        timeout $STEP_S ip netns exec "$PREFIX$k" ping -c 1 -W 2 -q "$SUBNET.1" >/dev/null ||
            die "$PREFIX$k cannot reach $SUBNET.1"
    done
}

child=
on_signal() { # $1: exit status 128 + signal
    if [ -n "$child" ]; then
        kill -TERM "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    exit "$1"
}
trap cleanup EXIT
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP

remove_leftovers
setup
echo "netns.sh: $N namespaces ${PREFIX}0..${PREFIX}$((N - 1)) on bridge ${PREFIX}sw," \
    "addresses $SUBNET.1-$((N)), links ${RATE/none/unshaped} ($QDISC)" >&2
export NETNS_PREFIX=$PREFIX NETNS_COUNT=$N NETNS_ADDR_TEMPLATE="$SUBNET.{k+1}" NETNS_DEV=veth0
timeout -k 10 "$LIMIT_S" "$@" &
child=$!
wait "$child"
rc=$?
child=
exit $rc
