# bench/lib.sh: what the comparison scripts (compare.sh, latency.sh) share; sourced, not run.
# The caller sets TOP (the repository), BUILD (its build directory), RUN_LIMIT (seconds one run
# may take), QUIET_WAIT (seconds to wait for a quiet machine) and defines say() and die().

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
    [ -x "$BUILD/tools/collective-launch" ] || die "no $BUILD/tools/collective-launch"
}

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
        "$BUILD/CMakeCache.txt"))"
    echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs," \
        "$(free -g | awk '/^Mem:/ {print $2}') GiB RAM, kernel $(uname -r)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "open mpi: $(dpkg-query -W -f='${Version}' openmpi-bin 2>/dev/null);" \
        "torch: $(dpkg-query -W -f='${Version}' python3-torch 2>/dev/null)"
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

# run_one FILE CMD...: stdout to FILE.txt, stderr to FILE.err, bounded by RUN_LIMIT; a failure
# sets FAILED=1.
FAILED=0
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
}
