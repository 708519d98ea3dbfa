#!/bin/sh
# What the Windows build (cmake/mingw-w64.cmake, `make windows`) needs, on Debian 12 (bookworm):
# the mingw-w64 cross compilers, Wine and an X server for running the tests, and vkgpt's
# libraries cross-built for x86_64-w64-mingw32 from Debian's own source packages (zeromq3,
# libsodium, cmocka, utf8proc, pcre2) into a prefix, as static libraries, so that the .exe files import
# only Windows' own DLLs. Vulkan's and volk's headers (and volk.c) are copied into the prefix too:
# mingw must never see /usr/include, which holds glibc's headers.
# Non-interactive and idempotent: only missing packages are installed, and with the prefix
# complete (its stamp file and every library present) nothing is done. /etc/apt is not touched:
# the source packages come through a private apt configuration under the work folder.
# Usage: scripts/windows-deps.sh [--prefix DIR]   (default $VKG_WIN_PREFIX, else build-win/deps)
# The sources and their builds go to DIR/../deps-src (removed by nothing; safe to delete).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
prefix="${VKG_WIN_PREFIX:-build-win/deps}"
while [ $# -gt 0 ]; do
    case "$1" in
    --prefix)
        [ $# -ge 2 ] || { echo "windows-deps: --prefix needs a folder" >&2; exit 2; }
        prefix="$2"
        shift 2
        ;;
    *)
        echo "windows-deps: unknown option '$1' (valid: --prefix DIR)" >&2
        exit 2
        ;;
    esac
done
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
work=$(dirname "$prefix")/deps-src
host=x86_64-w64-mingw32
jobs=${JOBS:-2}
srcpkgs="zeromq3 libsodium cmocka utf8proc pcre2"
# What a complete prefix holds (checked before and after building).
products="lib/libzmq.a lib/libsodium.a lib/libcmocka.a lib/libutf8proc.a lib/libpcre2-8.a
          include/zmq.h include/sodium.h include/cmocka.h include/utf8proc.h include/pcre2.h
          include/volk.h include/volk.c include/vulkan/vulkan.h lib/pkgconfig/libzmq.pc
          lib/pkgconfig/libsodium.pc lib/pkgconfig/cmocka.pc lib/pkgconfig/libutf8proc.pc
          lib/pkgconfig/libpcre2-8.pc"
stamp="$prefix/.windows-deps-complete"

die() {
    echo "windows-deps: $*" >&2
    exit 1
}

prefix_complete() {
    [ -f "$stamp" ] || return 1
    for f in $products; do [ -e "$prefix/$f" ] || return 1; done
}

if prefix_complete; then
    echo "windows-deps: $prefix is complete ($(cat "$stamp")); nothing to do"
    exit 0
fi

# Debian packages: compilers, Wine (wine64 alone has no `wine` command), Xvfb (Wine 8.0's Vulkan
# needs its X11 driver loaded), the source-package tools, autotools (libsodium's orig tarball has
# no configure script), and the host tools the build runs (glslang, spirv-val, CMake).
PKGS="gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64 wine64 wine xvfb xauth dpkg-dev autoconf automake
      libtool make cmake pkg-config glslang-tools spirv-tools libvulkan-dev libvulkan-volk-dev
      mesa-vulkan-drivers vulkan-validationlayers debian-archive-keyring"
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=""
for p in $PKGS; do installed "$p" || missing="$missing $p"; done
if [ -n "$missing" ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "not root and no sudo; install these yourself:$missing"
        SUDO=sudo
    fi
    echo "windows-deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get -y -q -o Dpkg::Use-Pty=0 update || die "apt-get update failed"
    $SUDO apt-get -y -q -o Dpkg::Use-Pty=0 install --no-install-recommends $missing ||
        die "apt-get install failed for:$missing"
fi

# Debian's source packages through a private apt configuration: a deb-src entry for the mirror the
# system already uses, its own lists and no package cache, so /etc/apt and the system's lists stay
# as they are.
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || die "cannot read VERSION_CODENAME from /etc/os-release"
mirror=""
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" && $2 !~ /^\[/ {print $2; exit}' /etc/apt/sources.list)
fi
mirror="${mirror:-http://deb.debian.org/debian}"
apt_dir="$work/apt"
mkdir -p "$apt_dir/lists/partial" "$work/src"
printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' "$mirror" \
    "$codename" /usr/share/keyrings/debian-archive-keyring.gpg >"$apt_dir/src.sources"
apt_opts="-oDir::Etc::SourceList=/dev/null -oDir::Etc::SourceParts=$apt_dir
          -oDir::State::Lists=$apt_dir/lists -oDir::Cache::pkgcache= -oDir::Cache::srcpkgcache="

cd "$work/src"
need_fetch=""
for p in $srcpkgs; do
    [ -d "$p" ] || need_fetch="$need_fetch $p"
done
if [ -n "$need_fetch" ]; then
    echo "windows-deps: fetching Debian's source packages:$need_fetch (from $mirror, $codename)"
    # shellcheck disable=SC2086
    apt-get -q $apt_opts update || die "apt-get update of the private deb-src list failed"
    for p in $need_fetch; do
        # shellcheck disable=SC2086
        apt-get -q $apt_opts source --download-only "$p" ||
            die "cannot download the source package $p"
        dsc=$(ls "${p}"_*.dsc 2>/dev/null | head -n 1)
        [ -n "$dsc" ] || die "no ${p}_*.dsc after downloading $p"
        rm -rf "$p.tmp"
        dpkg-source --no-check -x "$dsc" "$p.tmp" >/dev/null || die "dpkg-source cannot unpack $dsc"
        mv "$p.tmp" "$p"
    done
fi

# The toolchain file this script ships with, for the CMake-built libraries.
toolchain="$root/cmake/mingw-w64.cmake"
[ -f "$toolchain" ] || die "missing $toolchain"
export VKG_WIN_PREFIX="$prefix"
export PKG_CONFIG_LIBDIR="$prefix/lib/pkgconfig" PKG_CONFIG_PATH=""
cmake_lib() { # source folder, then its own options
    s="$1"
    shift
    cmake -S "$s" -B "$s/build-win" -DCMAKE_TOOLCHAIN_FILE="$toolchain" \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" "$@" >"$s/build-win.log" 2>&1 ||
        die "configuring $s failed; see $s/build-win.log"
    cmake --build "$s/build-win" -j "$jobs" >>"$s/build-win.log" 2>&1 ||
        die "building $s failed; see $s/build-win.log"
    cmake --install "$s/build-win" >>"$s/build-win.log" 2>&1 ||
        die "installing $s failed; see $s/build-win.log"
}

t0=$(date +%s)
if [ ! -f "$prefix/lib/libsodium.a" ]; then
    echo "windows-deps: libsodium"
    (
        cd libsodium && : >build-win.log &&
            { [ -x configure ] || autoreconf -fi >>build-win.log 2>&1; } &&
            ./configure --host=$host --prefix="$prefix" --disable-shared --enable-static \
                --disable-dependency-tracking >>build-win.log 2>&1 &&
            make -j "$jobs" >>build-win.log 2>&1 && make install >>build-win.log 2>&1
    ) || die "libsodium failed; see $work/src/libsodium/build-win.log"
fi
if [ ! -f "$prefix/lib/libzmq.a" ]; then
    # mingw ships afunix.h, but libzmq 4.3.4 includes it only under MSVC: no IPC transport. GCC's
    # win32 thread model has no working std::condition_variable: the Win32 one.
    echo "windows-deps: libzmq (static, CURVE on libsodium)"
    cmake_lib "$work/src/zeromq3" -DBUILD_SHARED=OFF -DBUILD_STATIC=ON -DBUILD_TESTS=OFF \
        -DWITH_LIBSODIUM=ON -DWITH_LIBSODIUM_STATIC=ON -DENABLE_CURVE=ON \
        -DSODIUM_LIBRARIES="$prefix/lib/libsodium.a" -DSODIUM_INCLUDE_DIRS="$prefix/include" \
        -DWITH_LIBBSD=OFF -DWITH_DOCS=OFF -DWITH_DOC=OFF -DWITH_PERF_TOOL=OFF \
        -DZMQ_CV_IMPL=win32api -DZMQ_HAVE_IPC=OFF -DENABLE_PRECOMPILED=OFF -DENABLE_CPACK=OFF
    # A static libzmq wants ZMQ_STATIC in its users (no dllimport) and Windows' socket libraries.
    sed -i -e 's/^Cflags: \(.*\)$/Cflags: \1 -DZMQ_STATIC/' \
        -e 's/^Libs.private: \(.*\)$/Libs.private: \1 -lws2_32 -liphlpapi/' \
        "$prefix/lib/pkgconfig/libzmq.pc"
fi
if [ ! -f "$prefix/lib/libcmocka.a" ]; then
    # Built with mingw's C99 printf (%zu, %lld), as the tests are; its header's printf format
    # checking then says so (GCC's "printf" on mingw is Microsoft's, which has no %zu).
    echo "windows-deps: cmocka (static)"
    cmake_lib "$work/src/cmocka" -DWITH_STATIC_LIB=ON -DUNIT_TESTING=OFF -DWITH_EXAMPLES=OFF \
        -DCMAKE_C_FLAGS=-D__USE_MINGW_ANSI_STDIO=1
    sed -i 's/__attribute__ ((__format__ (__printf__, a, b)))/__attribute__ ((__format__ (__gnu_printf__, a, b)))/' \
        "$prefix/include/cmocka.h"
    grep -q __gnu_printf__ "$prefix/include/cmocka.h" ||
        die "cannot set cmocka.h's printf format checking to gnu_printf"
    # The static archive is named cmocka-static; the import library and DLL go, so that -lcmocka
    # links it.
    [ -f "$prefix/lib/libcmocka-static.a" ] || die "cmocka installed no libcmocka-static.a"
    rm -f "$prefix/lib/libcmocka.dll.a" "$prefix/bin/libcmocka.dll" "$prefix/bin/cmocka.dll"
    mv "$prefix/lib/libcmocka-static.a" "$prefix/lib/libcmocka.a"
fi
if [ ! -f "$prefix/lib/libutf8proc.a" ]; then
    echo "windows-deps: utf8proc (static)"
    cmake_lib "$work/src/utf8proc" -DBUILD_SHARED_LIBS=OFF -DUTF8PROC_ENABLE_TESTING=OFF
    # Its pkg-config file asks for the DLL's exports; the static library wants UTF8PROC_STATIC.
    sed -i 's/-DUTF8PROC_EXPORTS/-DUTF8PROC_STATIC/' "$prefix/lib/pkgconfig/libutf8proc.pc"
fi
if [ ! -f "$prefix/lib/libpcre2-8.a" ]; then
    # The 8-bit library only, with Unicode and the JIT (the tokenizers' split patterns).
    echo "windows-deps: pcre2 (static, 8-bit, Unicode, JIT)"
    cmake_lib "$work/src/pcre2" -DBUILD_SHARED_LIBS=OFF -DBUILD_STATIC_LIBS=ON \
        -DPCRE2_BUILD_PCRE2_8=ON -DPCRE2_BUILD_PCRE2_16=OFF -DPCRE2_BUILD_PCRE2_32=OFF \
        -DPCRE2_SUPPORT_UNICODE=ON -DPCRE2_SUPPORT_JIT=ON -DPCRE2_BUILD_PCRE2GREP=OFF \
        -DPCRE2_BUILD_TESTS=OFF -DPCRE2_STATIC_PIC=OFF
    # A static library's users need PCRE2_STATIC (no dllimport); say so where pkg-config does.
    grep -q PCRE2_STATIC "$prefix/lib/pkgconfig/libpcre2-8.pc" ||
        sed -i 's/^Cflags: \(.*\)$/Cflags: \1 -DPCRE2_STATIC/' "$prefix/lib/pkgconfig/libpcre2-8.pc"
fi
# Vulkan's and volk's headers (volk.c already opens vulkan-1.dll under _WIN32).
vk_inc=$(dirname "$(dirname "$(find /usr/include -maxdepth 2 -name vulkan.h -path '*vulkan/*' | head -n 1)")")
[ -f "$vk_inc/vulkan/vulkan.h" ] || die "Vulkan's headers not found under /usr/include (libvulkan-dev)"
[ -f /usr/include/volk.c ] || die "/usr/include/volk.c not found (libvulkan-volk-dev)"
cp /usr/include/volk.h /usr/include/volk.c "$prefix/include/"
cp -r "$vk_inc/vulkan" "$prefix/include/"
[ -d "$vk_inc/vk_video" ] && cp -r "$vk_inc/vk_video" "$prefix/include/"

for f in $products; do
    [ -e "$prefix/$f" ] || die "after building, $prefix/$f is still missing"
done
versions=""
for p in $srcpkgs; do
    v=$(ls "$work/src/${p}"_*.dsc | head -n 1 | sed 's/.*_\(.*\)\.dsc$/\1/')
    versions="$versions $p $v"
done
echo "built for $host:$versions" >"$stamp"
echo "windows-deps: $prefix complete in $(($(date +%s) - t0)) s ($(cat "$stamp"))"
