# shellcheck shell=bash disable=SC2034 # sourced; it sets what the scripts read
# bench/lib.sh: what the bench scripts share; sourced, not run. A script starts with
#
#     . "$(dirname "$0")/lib.sh"
#     bench_init NAME            # its name for messages; HERE, TOP, BUILD, the binaries
#     ...its defaults...
#     while [ $# -gt 0 ]; do
#         case $1 in
#         --own-option) ...; shift ;;
#         *) bench_option "$@" || bench_usage_error "$1"; shift "$BENCH_SHIFT" ;;
#         esac
#     done
#
# and gets: the common options (bench_option), the paths of the built binaries it measures
# (from benchlib.py, the one place that names them), the package and build steps, the state of
# the machine, the wait for a quiet machine, bounded runs, alternating repetitions, the cluster
# of network namespaces (netns.sh) and the Open MPI command lines. Every external command it
# starts is bounded by timeout.

# bench_init NAME: HERE (bench/), TOP (the repository), BUILD ($BUILD_DIR or <repo>/build-bench),
# the binaries, and the defaults of the common options.
bench_init() {
    PROG=$1
    HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    TOP=$(dirname "$HERE")
    BUILD=${BUILD_DIR:-$TOP/build-bench}
    PY=/usr/bin/python3 # Debian's, which sees python3-torch and numpy
    eval "$(python3 "$HERE/benchlib.py" shell-paths "$BUILD")" ||
        { echo "$PROG: bench/benchlib.py failed" >&2; exit 1; }
    REPEATS=3 RESDIR='' MINB=8 MAXB=1M ITERS=100 WARMUP=5 BUDGET=1 RUN_LIMIT=600 QUIET_WAIT=180
    CLUSTER='' RATE=1gbit QDISC=tbf NICE=0
    FAILED=0
}

say() { echo "$PROG: $*" >&2; }
die() { say "$*"; exit 1; }

# The script's header comment, from line 2 to "set -u", as its --help.
bench_usage() { sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; }
bench_usage_error() { say "unknown option ${1:-} (see --help)"; exit 2; }

# bench_value OPTION VALUE PATTERN: VALUE, or a usage error when it is missing or does not match
# the extended regular expression PATTERN.
bench_value() {
    if [ -z "${2:-}" ] || ! printf '%s\n' "$2" | grep -Eqx -- "$3"; then
        say "$1 wants ${4:-a value like $3}, not '${2:-}'"
        exit 2
    fi
    printf '%s\n' "$2"
}

NUM='[0-9]+'
REAL='[0-9]+([.][0-9]+)?'
SIZE='[0-9]+[KMG]?'

# bench_option "$@": takes the common option at $1 (and its value), sets BENCH_SHIFT to the
# words used; returns 1 when $1 is not a common option. The options:
#   -R N        repetitions          -o DIR      results directory
#   -b SIZE     smallest size        -e SIZE     largest size (bytes, K, M, G)
#   -n N        iterations at most   -w N        warm-up operations
#   -T SECONDS  time budget per size -L SECONDS  bound of one run
#   -Q SECONDS  wait for a quiet machine first (load average below 0.5), at most this long
#   -N NICE     nice of the measured processes (and of their autogroup)
#   --cluster HxM  H hosts (network namespaces, netns.sh), M ranks each
#   --rate R    the links' rate (tc: 1gbit, 10gbit, ...; none: unshaped)
#   --qdisc Q   tbf or htb
#   -h, --help
bench_option() {
    BENCH_SHIFT=2
    case $1 in
    -R) REPEATS=$(bench_value "$1" "${2:-}" "$NUM") || exit 2 ;;
    -o) RESDIR=$(bench_value "$1" "${2:-}" '.+' "a directory") || exit 2 ;;
    -b) MINB=$(bench_value "$1" "${2:-}" "$SIZE") || exit 2 ;;
    -e) MAXB=$(bench_value "$1" "${2:-}" "$SIZE") || exit 2 ;;
    -n) ITERS=$(bench_value "$1" "${2:-}" "$NUM") || exit 2 ;;
    -w) WARMUP=$(bench_value "$1" "${2:-}" "$NUM") || exit 2 ;;
    -T) BUDGET=$(bench_value "$1" "${2:-}" "$REAL") || exit 2 ;;
    -L) RUN_LIMIT=$(bench_value "$1" "${2:-}" "$NUM") || exit 2 ;;
    -Q) QUIET_WAIT=$(bench_value "$1" "${2:-}" "$NUM") || exit 2 ;;
    -N) NICE=$(bench_value "$1" "${2:-}" '-?[0-9]+') || exit 2 ;;
    --cluster) CLUSTER=$(bench_value "$1" "${2:-}" '[0-9]+x[0-9]+' "HOSTSxRANKS") || exit 2 ;;
    --rate) RATE=$(bench_value "$1" "${2:-}" '[0-9]+[kmg]?bit|none') || exit 2 ;;
    --qdisc) QDISC=$(bench_value "$1" "${2:-}" 'tbf|htb') || exit 2 ;;
    -h | --help) bench_usage; exit 0 ;;
    *) return 1 ;;
    esac
}

# bench_resdir KIND: RESDIR made absolute (default /tmp/coll-KIND-<date>) and created.
bench_resdir() {
    RESDIR=${RESDIR:-/tmp/coll-$1-$(date +%Y%m%d-%H%M%S)}
    mkdir -p "$RESDIR" || die "cannot create $RESDIR"
    RESDIR=$(cd "$RESDIR" && pwd)
}

# ---- packages and the build ---------------------------------------------------------------

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# ensure_packages PKG...: apt-get install those that are missing (needs root then).
ensure_packages() {
    local missing=() p
    for p in "$@"; do
        installed "$p" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || die "missing packages ${missing[*]}; run as root"
    say "installing ${missing[*]}"
    timeout 300 apt-get update -q >&2 || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive timeout 1800 apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >&2 || die "apt-get install ${missing[*]} failed"
}

# build_targets TARGET...: the project's dependencies, a Release configuration when $BUILD is
# new, then the targets.
build_targets() {
    timeout 1200 "$TOP/deploy/install-deps.sh" >&2 || die "deploy/install-deps.sh failed"
    if [ ! -f "$BUILD/CMakeCache.txt" ]; then
        timeout 300 cmake -S "$TOP" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >&2 ||
            die "cmake configure failed"
    fi
    timeout 1800 cmake --build "$BUILD" -j "$(nproc)" --target "$@" >&2 || die "build failed"
    # The launcher is copied into the build tree at configure time.
    [ -x "$LAUNCH" ] || die "no $LAUNCH"
}

# build_mpi NAME: bench/NAME.c built with mpicc into $RESDIR/NAME.
build_mpi() {
    timeout 120 mpicc -O2 -o "$RESDIR/$1" "$HERE/$1.c" || die "mpicc $1.c failed"
}

# ---- the machine --------------------------------------------------------------------------

# describe_machine: the state measured (commit, build, machine, load) on stdout.
describe_machine() {
    local commit
    commit=$(git -C "$TOP" rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [ -n "$(git -C "$TOP" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
        commit="$commit + uncommitted changes ($(git -C "$TOP" diff --shortstat | sed 's/^ //');"
        commit="$commit sha256 of git diff HEAD: $(git -C "$TOP" diff HEAD | sha256sum | cut -c1-12))"
    fi
    echo "date: $(date -Is)"
    echo "collectived: $commit; build $BUILD ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' \
        "$BUILD/CMakeCache.txt" 2>/dev/null))"
    echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs," \
        "$(free -g | awk '/^Mem:/ {print $2}') GiB RAM, kernel $(uname -r)"
    echo "load before: $(uptime | sed 's/.*load average: //')"
    echo "open mpi: $(dpkg-query -W -f='${Version}' openmpi-bin 2>/dev/null);" \
        "torch: $(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null)"
    [ -z "$CLUSTER" ] || echo "cluster: $CLUSTER (hosts x ranks), links $RATE ($QDISC)"
}

# machine_file FILE TOP BASELINE: what the scripts that keep a results directory of their own
# (staged-overlap.sh, stream-wait.sh) record of the run: the commit of TOP with a digest of
# its uncommitted changes, the baseline daemon (none when empty), the CPU, the load before.
machine_file() {
    {
        echo "commit $(git -C "$2" rev-parse HEAD) $(git -C "$2" diff HEAD | sha1sum | cut -c1-12)"
        echo "baseline ${3:-none}"
        echo "cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
        echo "load before: $(uptime)"
    } >"$1"
}

# wait_quiet: waits (at most QUIET_WAIT seconds) for the 1-minute load average to fall below
# 0.5, e.g. after the build; warns when it does not.
wait_quiet() {
    local end=$(($(date +%s) + QUIET_WAIT)) load
    while :; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        awk -v l="$load" 'BEGIN { exit !(l >= 0.5) }' || return 0
        [ "$(date +%s)" -lt "$end" ] || break
        sleep 10
    done
    say "warning: load average $load; other work on this machine skews the numbers"
}

# bench_nice_wrapper NAME PROGRAM: $RESDIR/bin/NAME runs PROGRAM at nice $NICE, its session's
# autogroup too (collective-launch starts every process in a session of its own, and with
# autogroup scheduling nice counts only within a session). Prints the wrapper's path.
bench_nice_wrapper() {
    mkdir -p "$RESDIR/bin" || die "cannot create $RESDIR/bin"
    cat >"$RESDIR/bin/$1" <<EOF
#!/bin/sh
[ -w /proc/self/autogroup ] && echo $NICE >/proc/self/autogroup
exec nice -n $NICE "$2" "\$@"
EOF
    chmod +x "$RESDIR/bin/$1"
    echo "$RESDIR/bin/$1"
}

# ---- runs ---------------------------------------------------------------------------------

# run_one FILE CMD...: stdout to FILE.txt, stderr to FILE.err, bounded by RUN_LIMIT; a failure
# sets FAILED=1.
run_one() {
    local out=$1 rc t0
    shift
    t0=$(date +%s)
    timeout -k 10 "$RUN_LIMIT" "$@" >"$out.txt" 2>"$out.err"
    rc=$?
    say "  $(basename "$out"): exit $rc, $(($(date +%s) - t0)) s, load $(cut -d' ' -f1 \
        /proc/loadavg)"
    if [ $rc -ne 0 ]; then
        FAILED=1
        tail -n 5 "$out.err" | sed 's/^/    /' >&2
    fi
    return $rc
}

# bench_repeat FUNC CONFIG...: REPEATS repetitions; repetition k runs "FUNC DIR CONFIG" for
# every CONFIG (a string of words) once, into DIR = $RESDIR/rep<k>, the order rotated by one
# from one repetition to the next, so that no configuration always runs after the same one.
bench_repeat() {
    local func=$1 k i n dir c
    shift
    n=$#
    local configs=("$@")
    for ((k = 1; k <= REPEATS; k++)); do
        dir=$RESDIR/rep$k
        mkdir -p "$dir"
        say "repetition $k of $REPEATS (load $(cut -d' ' -f1 /proc/loadavg))"
        for ((i = 0; i < n; i++)); do
            read -r -a c <<<"${configs[$(((i + k - 1) % n))]}"
            "$func" "$dir" "${c[@]}"
        done
    done
}

# ---- the cluster of network namespaces (netns.sh) -------------------------------------------

# cluster_hosts, cluster_ranks: H and M of --cluster HxM (inside the cluster, H is its size).
cluster_hosts() { if in_cluster; then echo "$NETNS_COUNT"; else echo "${CLUSTER%x*}"; fi; }
cluster_ranks() { echo "${CLUSTER#*x}"; }

# in_cluster: whether this process runs inside netns.sh (its NETNS_* variables are set).
in_cluster() { [ -n "${NETNS_PREFIX:-}" ]; }

# cluster_run LIMIT ARGS...: runs "$0 ARGS..." again inside a new cluster of $CLUSTER's hosts
# with links of $RATE, for at most LIMIT seconds; returns its status.
cluster_run() {
    local limit=$1
    shift
    ensure_packages iproute2 iputils-ping
    "$HERE/netns.sh" -n "$(cluster_hosts)" -r "$RATE" -q "$QDISC" -t "$limit" -- "$0" "$@"
}

# launch_cmd NODES RANKS: collective-launch's command line for a job of NODES x RANKS, inside
# the cluster's namespaces (daemon and ranks of node k in namespace k) when there is one.
launch_cmd() {
    LAUNCH_CMD=("$LAUNCH" --nodes "$1" --ranks-per-node "$2" --daemon "$DAEMON"
                --timeout "$((RUN_LIMIT - 20))")
    if in_cluster; then
        LAUNCH_CMD+=(--netns-prefix "$NETNS_PREFIX" --netns-addr "$NETNS_ADDR_TEMPLATE"
                     --netns-ranks)
    fi
}

# ---- Open MPI -----------------------------------------------------------------------------

# mpi_cmd NP TRANSPORT [RANKS_PER_HOST]: mpirun's command line (MPI_CMD) for NP processes.
#   shm  its default transport (ob1 + vader shared memory) on this host
#   tcp  ob1 with the TCP BTL only, on loopback: what it uses between hosts
# Inside the cluster (RANKS_PER_HOST given), mpirun runs in namespace 0 and starts its daemons
# in namespaces 0..H-1 through netns-agent.sh (hosts of their own names), RANKS_PER_HOST ranks
# each in rank order, TCP between hosts and shared memory within one (vader). Two processes
# on this 2-CPU machine are pinned one per CPU (Open MPI's default); more are not pinned and
# yield while they wait (what Open MPI does itself when it knows it is oversubscribed).
mpi_cmd() {
    local np=$1 transport=$2 rph=${3:-}
    MPI_CMD=(mpirun --allow-run-as-root --oversubscribe)
    if [ -n "$rph" ]; then
        mpi_cluster_cmd "$np" "$rph"
        return
    fi
    MPI_CMD+=(--mca oob_tcp_if_include lo)
    if [ "$np" = 2 ] && [ "$(nproc)" -ge 2 ]; then
        MPI_CMD+=(--bind-to core)
    else
        MPI_CMD+=(--bind-to none)
    fi
    # shellcheck disable=SC2054 # tcp,self is one value of --mca btl
    [ "$transport" = tcp ] && MPI_CMD+=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo)
    MPI_CMD+=(-np "$np")
}

mpi_cluster_cmd() {
    local np=$1 rph=$2 hosts=$RESDIR/mpi-hosts-$NETNS_PREFIX k
    : >"$hosts"
    for ((k = 0; k < np / rph; k++)); do
        echo "$NETNS_PREFIX$k slots=$rph" >>"$hosts"
    done
    # shellcheck disable=SC2054 # tcp,vader,self is one value of --mca btl
    MPI_CMD=(ip netns exec "${NETNS_PREFIX}0" "${MPI_CMD[@]}" --hostfile "$hosts"
             --map-by slot --bind-to none --mca plm_rsh_agent "$HERE/netns-agent.sh"
             --mca oob_tcp_if_include "$NETNS_DEV" --mca btl_tcp_if_include "$NETNS_DEV"
             --mca pml ob1 --mca btl tcp,vader,self --mca mpi_yield_when_idle 1 -np "$np")
}

# ---- two builds side by side (ab-latency.sh, ab-builds.sh) ----------------------------------

# built_in BUILD NAME: the path of binary NAME (a key of BUILT in benchlib.py) in build BUILD.
built_in() { python3 "$HERE/benchlib.py" path "$1" "$2"; }

# ab_check_builds BUILD_A BUILD_B TOOL: both given, each with the daemon, the launcher and TOOL
# (a key of BUILT: PERF, LAT).
ab_check_builds() {
    local d f p
    [ -n "$1" ] && [ -n "$2" ] || die "give both builds: -a BUILD_A -b BUILD_B"
    for d in "$1" "$2"; do
        for f in DAEMON "$3" LAUNCH; do
            p=$(built_in "$d" "$f") || die "benchlib.py knows no binary $f"
            [ -x "$p" ] || die "$p is missing (build it first)"
        done
    done
}
