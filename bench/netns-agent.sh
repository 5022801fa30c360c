#!/bin/sh
# netns-agent.sh: Open MPI's remote-start agent (--mca plm_rsh_agent) for the hosts of
# bench/netns.sh. mpirun calls it as ssh, "netns-agent.sh [ssh options] HOST COMMAND...", to
# start its daemon on HOST; here HOST is a network namespace on this machine, so the command
# runs inside it, with a host name of its own (a private UTS namespace: Open MPI tells hosts
# apart by name), through sh -c as ssh would. lib.sh's mpi_cmd uses it; not run by hand.
while [ $# -gt 0 ]; do
    case $1 in
    -*) shift ;;
    *) break ;;
    esac
done
if [ $# -lt 2 ]; then
    echo "netns-agent.sh: usage: netns-agent.sh HOST COMMAND..." >&2
    exit 2
fi
host=$1
shift
[ -e "/run/netns/$host" ] || { echo "netns-agent.sh: no network namespace $host" >&2; exit 1; }
# shellcheck disable=SC2016 # expanded by the inner shells
exec ip netns exec "$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$host" "$@"
