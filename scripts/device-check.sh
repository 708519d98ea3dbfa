#!/bin/sh
# Packs the device check: everything a GPU machine with no package manager and no network needs
# to check and measure vkgpt, in one folder.
#
#   scripts/device-check.sh pack [BUILD] [DIR]
#       copies into DIR (default .devcheck) the vkgpt binary and the shader test binaries of BUILD
#       (default build; every ctest label gpu test and the model tests on a device), the
#       cooperative-matrix kernel's device test (coopmat_device), run.sh and classify.awk
#       (scripts/device-check/), the PyTorch step of bench/train, and:
#       lib/           every shared library the binaries load beyond glibc (the Vulkan loader,
#                      libzmq, OpenBLAS...), but libstdc++ and libgcc_s;
#       lib-fallback/  libstdc++ and libgcc_s, and Debian 12's libglvnd family (libGLdispatch,
#                      which NVIDIA's Vulkan driver loads, libGLX, libEGL, libGL, libOpenGL,
#                      libGLESv2): run.sh uses each only where the GPU machine lacks it, so an
#                      image's newer libstdc++ is never shadowed;
#       debs/          the .deb files of libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0
#                      libgles2 (downloaded with apt-get download, kept in BUILD/devcheck-debs),
#                      for unpacking into / there by hand (dpkg -x) should lib-fallback not do;
#       layers/        the Khronos validation layer, its manifest pointing at its copy.
#       Also DIR.tar.gz, the one file to carry. On the GPU machine:
#           tar -xzf devcheck.tar.gz && ./devcheck/run.sh [--deadline SECONDS] [OUT]
#       (see scripts/device-check/run.sh and docs/DEVICE-CHECK.md).
set -eu
cmd=${1:-}
[ "$cmd" = pack ] || { echo "usage: scripts/device-check.sh pack [BUILD] [DIR]" >&2; exit 2; }
cd "$(dirname "$0")/.."
build=${2:-build}
dir=${3:-.devcheck}
# Every shader test (ctest label gpu; its _split forms are the same binaries under a lowered
# index limit) and the model tests that run on a device.
[ -f "$build/CTestTestfile.cmake" ] || { echo "device-check: $build is not a build folder" >&2; exit 1; }
tests="test_gpt2 test_gpt2_parts test_memtype"
for t in $(cd "$build" && ctest -N -L '^gpu$' | sed -n 's/.*Test *#[0-9]*: *\(test_[a-z0-9_]*\)$/\1/p'); do
    [ -x "$build/tests/$t" ] && tests="$tests $t"
done
[ -x "$build/vkgpt" ] || { echo "device-check: $build/vkgpt is not built (make build)" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir/lib" "$dir/layers"
cp "$build/vkgpt" "$dir/"
for t in $tests; do
    [ -x "$build/tests/$t" ] || { echo "device-check: $build/tests/$t is not built" >&2; exit 1; }
    cp "$build/tests/$t" "$dir/"
done
# The real cooperative-matrix tests: not named test_* (run.sh runs those on every device), run
# first, only where the device has cooperative matrices.
[ -x "$build/tests/test_coopmat_device" ] ||
    { echo "device-check: $build/tests/test_coopmat_device is not built" >&2; exit 1; }
cp "$build/tests/test_coopmat_device" "$dir/coopmat_device"
# Every library the binaries load, but glibc's own (the target has a glibc; mixing is unsafe);
# libstdc++ and libgcc_s only as fallbacks (GPU images carry newer ones).
mkdir -p "$dir/lib-fallback" "$dir/debs"
for b in "$dir"/vkgpt "$dir"/test_* "$dir"/coopmat_device; do
    ldd "$b" | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | ld-linux*)
        continue ;;
    libstdc++.so.* | libgcc_s.so.*) cp -L "$lib" "$dir/lib-fallback/" ;;
    *) cp -L "$lib" "$dir/lib/" ;;
    esac
done
# The Vulkan loader and libglvnd as NVIDIA's driver needs them (what worked on the H200).
debs="libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2"
cache=${DEVCHECK_DEBS:-$build/devcheck-debs}
mkdir -p "$cache"
for p in $debs; do
    ls "$cache/${p}_"*.deb >/dev/null 2>&1 && continue
    (cd "$cache" && apt-get download "$p" >/dev/null 2>&1) || {
        echo "device-check: cannot download $p (apt-get download $p); put its .deb in $cache" >&2
        exit 1
    }
done
unpacked=$(mktemp -d)
for p in $debs; do
    deb=$(ls "$cache/${p}_"*.deb | tail -1)
    cp "$deb" "$dir/debs/"
    dpkg -x "$deb" "$unpacked"
done
find "$unpacked" -name 'lib*.so.[0-9]' ! -name 'libvulkan.so.*' -exec cp -L {} "$dir/lib-fallback/" \;
rm -rf "$unpacked"
# The Vulkan loader: opened at run time (volk), so ldd does not list it; run.sh's LD_LIBRARY_PATH
# lets it be found there.
loader=$(ldconfig -p | awk '/libvulkan\.so\.1 .*x86-64/ { print $NF; exit }')
[ -n "$loader" ] || { echo "device-check: no Vulkan loader (libvulkan.so.1) here" >&2; exit 1; }
cp -L "$loader" "$dir/lib/"
# The validation layer: its library, and a manifest whose path is relative to the manifest.
layer=$(ls /usr/lib/x86_64-linux-gnu/libVkLayer_khronos_validation.so 2>/dev/null || true)
manifest=/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json
if [ -n "$layer" ] && [ -f "$manifest" ]; then
    cp -L "$layer" "$dir/lib/"
    sed 's|"library_path": *"[^"]*"|"library_path": "../lib/libVkLayer_khronos_validation.so"|' \
        "$manifest" >"$dir/layers/VkLayer_khronos_validation.json"
else
    echo "device-check: no Khronos validation layer here; the tests will ask for it there" >&2
fi
cp bench/train/pytorch_gpt2.py bench/train/pytorch_llama.py scripts/device-check/run.sh scripts/device-check/classify.awk "$dir/"
chmod +x "$dir/run.sh"
tar -czf "$dir.tar.gz" -C "$(dirname "$dir")" "$(basename "$dir")"
echo "device-check: $dir.tar.gz is $(du -h "$dir.tar.gz" | cut -f1)"
echo "device-check: packed $(ls "$dir" | wc -l) files and $(ls "$dir/lib" | wc -l) libraries into $dir ($(du -sh "$dir" | cut -f1))"
