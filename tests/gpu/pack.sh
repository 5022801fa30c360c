#!/bin/sh
# pack.sh: gather, on this Debian 12 machine, the Debian packages' files that the build and the
# daemons need on a GPU machine that has CUDA, CMake and a C compiler but none of Debian's
# packages and no network (tests/gpu/run.sh uses them there).
#
#   tests/gpu/pack.sh [DIR]        (default: build-gpu/root, beside the sources)
#
# Downloads the packages named below with apt-get download (no installation), unpacks each
# with dpkg -x into DIR, drops their documentation, and prints DIR's size, which must stay
# within what a call to the GPU machine carries (64 MiB with the sources). The libraries are
# Debian 12's, linked against glibc 2.36: run.sh checks the GPU machine's glibc and says so
# when it is older. Exit status: 0 packed, 1 a download or unpack failed.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
root=${1:-$top/build-gpu/root}

# The build's pkg-config modules (CMakeLists.txt files) and what their libraries load: UCX and
# its transports' libraries, protoc-c and its C++ libraries, the status server's, cmocka for
# the tests, and pkg-config itself. Not libsystemd (optional: sd_notify), whose library chain
# the GPU machine's own may not match.
PACKAGES="libuv1 libuv1-dev libucx0 libucx-dev libnuma1 librdmacm1 libibverbs1 libnl-3-200
libnl-route-3-200 libprotobuf-c1 libprotobuf-c-dev protobuf-c-compiler libprotoc32 libprotobuf32
libinih1 libinireader0 libinih-dev libhttp-parser2.9 libhttp-parser-dev libjansson4
libjansson-dev libsodium23 libsodium-dev libcmocka0 libcmocka-dev pkgconf
pkgconf-bin libpkgconf3"

debs=$(mktemp -d)
trap 'rm -rf "$debs"' EXIT
# shellcheck disable=SC2086 # PACKAGES is a list
(cd "$debs" && apt-get download -q $PACKAGES) >"$debs/download.log" 2>&1 || {
    cat "$debs/download.log" >&2
    echo "pack: apt-get download failed (apt-get update first?)" >&2
    exit 1
}
rm -rf "$root"
mkdir -p "$root"
for deb in "$debs"/*.deb; do
    dpkg -x "$deb" "$root"
done
rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian"
find "$root" -name "*.a" -delete  # the build links the shared libraries
echo "pack: $(ls "$debs"/*.deb | wc -l) packages in $root: $(du -sh "$root" | cut -f1)"
