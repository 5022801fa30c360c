#!/bin/bash
# netns.sh: run a command while N network namespaces, joined by shaped links, exist.
#
#   bench/netns.sh [-n N] [-r RATE] [-t SECONDS] [-s SUBNET] -- CMD [ARGS...]
#   bench/netns.sh --cleanup PREFIX [-n N]
#
# Creates namespaces <P>0 .. <P>N-1 and a switch namespace <P>sw holding a bridge. Namespace k
# has device veth0 with address SUBNET.(k+1)/24, paired with port p<k> on the bridge. Every link
# is shaped on both ends (egress of veth0 and of p<k>) with
#     tc qdisc add dev ... root tbf rate RATE burst 1mb latency 50ms
# (RATE 1gbit by default; a ring allreduce reaches 95 % of it, 0.119 GB/s busbw; -r none
# leaves the links unshaped). netem is not available in this kernel, so no delay or
# loss is added.
#
# P is a prefix unique to this run ("cpn<pid>x"), so nothing that this script did not create is
# ever touched. CMD runs in the root namespace with
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
            run tc -n "$ns" qdisc add dev veth0 root tbf rate "$RATE" burst 1mb latency 50ms
            run tc -n "$sw" qdisc add dev "p$k" root tbf rate "$RATE" burst 1mb latency 50ms
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

setup
echo "netns.sh: $N namespaces ${PREFIX}0..${PREFIX}$((N - 1)) on bridge ${PREFIX}sw," \
    "addresses $SUBNET.1-$((N)), links ${RATE/none/unshaped}" >&2
export NETNS_PREFIX=$PREFIX NETNS_COUNT=$N NETNS_ADDR_TEMPLATE="$SUBNET.{k+1}" NETNS_DEV=veth0
timeout -k 10 "$LIMIT_S" "$@" &
child=$!
wait "$child"
rc=$?
child=
exit $rc
