#!/bin/sh
# The cluster of network namespaces the benchmarks run on (bench/netns.sh, collective-launch
# --netns-ranks), checked for what the measurements rely on:
#   1. netns.sh removes the namespaces an earlier run left behind (cpn<pid>x..., pid gone) and
#      nothing else;
#   2. with --netns-ranks, node k's ranks run inside namespace <P>k, with MASTER_ADDR node 0's
#      address and their COLL_* rank, and the job's allreduces are right (coll_check).
# usage: netns_cluster_test.sh NETNS_SH LAUNCH DAEMON COLL_CHECK. Exit 77 (skip) without root
# or iproute2.
set -u
NETNS=$1 LAUNCH=$2 DAEMON=$3 CHECK=$4
[ "$(id -u)" = 0 ] || { echo "skip: needs root (network namespaces)"; exit 77; }
command -v ip >/dev/null || { echo "skip: needs ip (iproute2)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# 1. A leftover of a dead run (pid 4194303 is above any pid_max but the largest) and a namespace
#    of a live one (this shell's): the first goes, the second stays.
dead=cpn4194303x0 live=cpn$$x0
ip netns add "$dead" || fail "ip netns add $dead"
ip netns add "$live" || fail "ip netns add $live"
timeout 60 "$NETNS" -n 1 -r none -t 30 -- true || fail "netns.sh exited $?"
left=$(ip netns list | awk '{print $1}')
ip netns del "$live"
echo "$left" | grep -qx "$dead" && { ip netns del "$dead"; fail "the leftover $dead was kept"; }
echo "$left" | grep -qx "$live" || fail "the namespace $live of a live process was removed"

# 2. Two hosts of two ranks each.
# shellcheck disable=SC2016 # expanded by the inner shells
out=$(timeout 120 "$NETNS" -n 2 -r 1gbit -t 100 -- sh -c '
    "$0" --nodes 2 --ranks-per-node 2 --daemon "$1" --netns-prefix "$NETNS_PREFIX" \
        --netns-addr "$NETNS_ADDR_TEMPLATE" --netns-ranks --timeout 90 -- \
        sh -c "echo where rank=\$COLL_RANK ns=\$(ip netns identify \$\$) master=\$MASTER_ADDR \
               && exec \"\$0\" --colls allreduce --dtypes float32 --ops sum --counts 1,4099" "$2"
    ' "$LAUNCH" "$DAEMON" "$CHECK" 2>&1)
rc=$?
echo "$out" | grep -v "^\[d"
[ $rc -eq 0 ] || fail "the job exited $rc"
for r in 0 1 2 3; do
    echo "$out" | grep -Eq "^\[r$r\] where rank=$r ns=cpn[0-9]+x$((r / 2)) master=10\.9\.0\.1$" ||
        fail "rank $r did not run in namespace $((r / 2)) with MASTER_ADDR 10.9.0.1"
done
echo "ok: leftovers removed; ranks in their hosts' namespaces"
