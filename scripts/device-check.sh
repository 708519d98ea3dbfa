#!/bin/sh
# Checking and measuring vkgpt on a GPU machine that has no package manager and no network.
#
#   scripts/device-check.sh pack [BUILD] [DIR]
#       here: copy into DIR (default .devcheck) the vkgpt binary and the shader test binaries of
#       BUILD (default build), every shared library they load beyond glibc (the Vulkan loader,
#       libzmq and what it needs), the Khronos validation layer with a manifest that points at
#       its copy, the PyTorch step of bench/train, and run.sh. Nothing in DIR needs an install.
#   DIR/run.sh [OUT]
#       there: print the device; first, where the device lists an f16 x f16 + f32 cooperative-matrix
#       configuration, the cooperative-matrix matmul's tests on it (coopmat_device, built from
#       tests/test_matmul_coopmat.c: that kernel has run nowhere else; a failure fails the check;
#       again with VKG_COOPMAT_KHR=1, the SPIR-V rewritten to KHR, where the device has both);
#       then every
#       shader test against the CPU reference with the validation layer on (each must pass and
#       report no message); `vkgpt bench ops`, and its
#       matmul rows again with each entry of the tiled matmul's table (`--tiles ENTRY`, and
#       `ENTRY+sb` for the double-buffered ones);
#       `vkgpt bench train` for GPT-2 124M at T = 1024 with B = 1, 4, 8, 16 (B = 16 needs 26 GiB,
#       its logits 3.1 GiB in one allocation); and, where python3 can import torch with CUDA, PyTorch's
#       fp32 eager step on the same GPU and shapes (bench/train/pytorch_gpt2.py, with PyTorch's
#       fused attention where it has it), with the ratio; then bf16 at B = 8
#       (DEVCHECK_BF16_BATCHES): vkgpt --precision bf16 with --coopmat off and, where the
#       cooperative-matrix test passed, on, against PyTorch's bf16 autocast. Where the device
#       is one whose datasheet peaks run.sh knows (H100, H200, A100), the products' GFLOP/s are
#       also given as % of the fp32 peak and the training steps as model FLOPs utilization (fp32
#       against the fp32 peak, bf16 against the bf16 tensor-core peak). The log, a markdown
#       summary and the same as JSON (summary.json) go to OUT (default DIR/out, or $OUT when
#       set). DEVCHECK_BATCHES (default "1 4 8 16") and DEVCHECK_BF16_BATCHES (default "8") list
#       the batches, and DEVCHECK_BENCH_OPS=0 skips bench ops (for a quick check of the folder on
#       lavapipe). It exits 1 when a test failed. ctest's device_check_bundle packs and runs it
#       on lavapipe with no batches, so the folder cannot rot.
# Build first (make build). pack also writes DIR.tar.gz (the validation layer and
# OpenBLAS are most of it; 22 MB here), the thing to carry; on the machine:
#   tar -xzf .devcheck.tar.gz -C /tmp && /tmp/.devcheck/run.sh "$OUT"
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
# Every library the binaries load, but glibc's own (the target has a glibc; mixing is unsafe).
for b in "$dir"/vkgpt "$dir"/test_* "$dir"/coopmat_device; do
    ldd "$b" | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
    libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | libresolv.so.* | ld-linux*)
        continue ;;
    esac
    cp -L "$lib" "$dir/lib/"
done
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
cp bench/train/pytorch_gpt2.py "$dir/"
cat >"$dir/run.sh" <<'RUN'
#!/bin/sh
# Run on the GPU machine: see scripts/device-check.sh.
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${OUT:-$here/out}}
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export VK_LAYER_PATH="$here/layers"
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
log="$out/device-check.log"
sum="$out/summary.md"
json="$out/summary.json"
jtests=""
jtrain=""
: >"$log"
echo "# vkgpt device check, $(date -u '+%Y-%m-%d %H:%M UTC')" >"$sum"
step() { echo "== $*" | tee -a "$log"; }
step "devices"
"$here/vkgpt" devices >>"$log" 2>&1
"$here/vkgpt" devices 2>&1 | head -3 | sed 's/^ */    /; 1s/^    /device: /' >>"$sum"
# The physical limits where the device is known: dense fp32 (CUDA cores) and bf16 tensor-core
# TFLOP/s from NVIDIA's datasheets (boost clock, no sparsity); "" elsewhere.
devname=$("$here/vkgpt" devices 2>&1 | head -1)
case "$devname" in
*"H100 PCIe"*) peak32=51; peak16=756 ;;
*"H100 NVL"* | *"H200 NVL"*) peak32=60; peak16=835 ;;
*H100* | *H200*) peak32=67; peak16=989 ;; # SXM
*A100*) peak32=19.5; peak16=312 ;;
*) peak32=""; peak16="" ;;
esac
echo "" >>"$sum"
if [ -n "$peak32" ]; then
    echo "peaks (datasheet, dense): fp32 $peak32 TFLOP/s, bf16 tensor cores $peak16 TFLOP/s" >>"$sum"
else
    echo "peaks: not known for this device (no % of peak below)" >>"$sum"
fi
echo "" >>"$sum"
echo "| test | result | seconds |" >>"$sum"
echo "|---|---|---|" >>"$sum"
failed=0
coopmat=0
# Cooperative matrices first: the kernel's only run on real fragments
# (see tests/test_matmul_coopmat.c).
if "$here/vkgpt" devices 2>&1 | grep -q 'f16\*f16+f32->f32 subgroup'; then
    step "coopmat_device"
    start=$(date +%s)
    if "$here/coopmat_device" >>"$log" 2>&1; then r=pass; coopmat=1; else
        r="FAIL ($?)"; failed=$((failed + 1))
        echo "device-check: THE COOPERATIVE-MATRIX KERNEL FAILED ON THIS DEVICE (see $log)" >&2
    fi
    echo "| coopmat_device | $r | $(( $(date +%s) - start )) |" >>"$sum"
    jtests="{\"test\": \"coopmat_device\", \"result\": \"$r\", \"seconds\": $(( $(date +%s) - start ))}"
    # The same on the KHR extension (the SPIR-V rewritten) where the device has both.
    if "$here/vkgpt" devices 2>&1 | grep -q 'f16\*f16+f32->f32 subgroup (KHR)' &&
        "$here/vkgpt" devices 2>&1 | grep -q 'f16\*f16+f32->f32 subgroup (NV)'; then
        step "coopmat_device (VKG_COOPMAT_KHR=1)"
        start=$(date +%s)
        if VKG_COOPMAT_KHR=1 "$here/coopmat_device" >>"$log" 2>&1; then r=pass; else
            r="FAIL ($?)"; failed=$((failed + 1))
            echo "device-check: THE COOPERATIVE-MATRIX KERNEL FAILED ON KHR (see $log)" >&2
        fi
        echo "| coopmat_device KHR | $r | $(( $(date +%s) - start )) |" >>"$sum"
        jtests="$jtests, {\"test\": \"coopmat_device_khr\", \"result\": \"$r\", \"seconds\": $(( $(date +%s) - start ))}"
    fi
else
    step "coopmat_device: not run, no f16 x f16 + f32 cooperative-matrix configuration listed"
    echo "| coopmat_device | not run: no cooperative matrices | 0 |" >>"$sum"
fi
for t in "$here"/test_*; do
    name=$(basename "$t")
    step "$name"
    start=$(date +%s)
    if "$t" >>"$log" 2>&1; then r=pass; else r="FAIL ($?)"; failed=$((failed + 1)); fi
    echo "| $name | $r | $(( $(date +%s) - start )) |" >>"$sum"
    jtests="$jtests${jtests:+, }{\"test\": \"$name\", \"result\": \"$r\", \"seconds\": $(( $(date +%s) - start ))}"
done
if [ "${DEVCHECK_BENCH_OPS:-1}" != 0 ]; then
    step "bench ops"
    ops=$("$here/vkgpt" bench ops 2>&1) || echo "bench ops failed" >>"$sum"
    echo "$ops" >>"$log"
    # the products' GFLOP/s against the fp32 peak
    echo "" >>"$sum"
    echo "| matmul (fp32, the device's tiles) | shape | GFLOP/s | % of fp32 peak |" >>"$sum"
    echo "|---|---|---|---|" >>"$sum"
    echo "$ops" | awk -v peak="$peak32" '/^matmul_(fwd|bwd) / {
        shape = $2; for (i = 3; i < NF - 4; i++) shape = shape " " $i
        g = $(NF - 3); pct = peak != "" ? sprintf("%.1f", g / (peak * 10)) : "-"
        printf "| %s | %s | %s | %s |\n", $1, shape, g, pct }' >>"$sum"
    # the tiled matmul's table, unmeasured on GPUs: every entry on the matmul rows, and each
    # double-buffered entry again single buffered (ENTRY+sb) to compare
    for e in $("$here/vkgpt" devices --tiles |
        awk 'NR > 1 { print $1; if (/double buffered/) print $1 "+sb" }'); do
        step "bench ops --op matmul --tiles $e"
        "$here/vkgpt" bench ops --op matmul --tiles "$e" >>"$log" 2>&1 ||
            echo "bench ops --tiles $e failed" >>"$sum"
    done
fi
echo "" >>"$sum"
torch_ok=0
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null && torch_ok=1
# GPT-2 124M at T = 1024 at batch $1: vkgpt's step (bench train, extra flags in $2: sets vms,
# vtok) and PyTorch's (eager, with its own fused attention where it has it; extra flags in $2:
# sets pms, ptok, "-" without PyTorch); ratio: vkgpt's tokens/s over PyTorch's.
vk_step() {
    step "bench train B=$1 $2"
    v=$("$here/vkgpt" bench train --layers 12 --heads 12 --channels 768 --vocab 50257 \
        --ctx 1024 --seq 1024 --batch "$1" --steps 5 --warmup-steps 2 --no-profile $2 2>&1)
    echo "$v" >>"$log"
    vms=$(echo "$v" | awk '/^ms\/step:/ { print $2 }')
    vtok=$(echo "$v" | awk '/^tokens\/s:/ { print $2 }')
}
pt_step() {
    pms=-; ptok=-
    [ "$torch_ok" = 1 ] || return 0
    step "pytorch B=$1 $2"
    p=$(python3 "$here/pytorch_gpt2.py" --preset l4 --layers 12 --heads 12 --channels 768 \
        --vocab 50257 --ctx 1024 --seq 1024 --batch "$1" --steps 5 --warmup-steps 2 \
        --device cuda $2 2>&1)
    echo "$p" >>"$log"
    pms=$(echo "$p" | awk '/^ms\/step:/ { print $2 }')
    ptok=$(echo "$p" | awk '/^tokens\/s:/ { print $2 }')
    pms=${pms:-failed}; ptok=${ptok:-failed}
}
# Model FLOPs utilization against peak $1 (TFLOP/s) at vkgpt's tokens/s: 6 N + 12 L C T FLOPs
# per token (PaLM's count; N = 124475904 parameters as vkgpt lays them out, L = 12, C = 768,
# T = 1024); "-" without a known peak.
mfu() {
    if [ -z "$1" ] || [ -z "$vtok" ]; then echo -; else
        awk -v t="$vtok" -v p="$1" 'BEGIN { printf "%.1f%%", 100 * t * (6 * 124475904 + 12 * 12 * 768 * 1024) / (p * 1e12) }'
    fi
}
ratio() {
    if [ -z "$vtok" ] || [ "$ptok" = - ] || [ "$ptok" = failed ]; then echo -; else
        awk -v a="$vtok" -v b="$ptok" 'BEGIN { printf "%.3f", a / b }'
    fi
}
echo "" >>"$sum"
echo "| GPT-2 124M, T=1024, fp32 | vkgpt ms/step | vkgpt tokens/s | PyTorch eager ms/step | PyTorch tokens/s | vkgpt / PyTorch | vkgpt MFU (fp32 peak) |" >>"$sum"
echo "|---|---|---|---|---|---|---|" >>"$sum"
for B in ${DEVCHECK_BATCHES-1 4 8 16}; do
    vk_step "$B" ""
    pt_step "$B" "--precision fp32"
    echo "| B=$B | ${vms:-failed} | ${vtok:-failed} | $pms | $ptok | $(ratio) | $(mfu "$peak32") |" >>"$sum"
    jtrain="$jtrain${jtrain:+, }{\"batch\": $B, \"vkgpt_ms_per_step\": \"${vms:-failed}\", \"vkgpt_tokens_per_s\": \"${vtok:-failed}\", \"pytorch_ms_per_step\": \"$pms\", \"pytorch_tokens_per_s\": \"$ptok\"}"
done
# bf16: vkgpt's plain bf16 kernels, and its cooperative matrices where their test passed above,
# against PyTorch's bf16 autocast.
echo "" >>"$sum"
echo "| GPT-2 124M, T=1024, bf16 | vkgpt --coopmat | vkgpt ms/step | vkgpt tokens/s | PyTorch autocast ms/step | PyTorch tokens/s | vkgpt / PyTorch | vkgpt MFU (bf16 tensor peak) |" >>"$sum"
echo "|---|---|---|---|---|---|---|---|" >>"$sum"
jbf16=""
for B in ${DEVCHECK_BF16_BATCHES-8}; do
    pt_step "$B" "--precision bf16"
    for cm in off on; do
        [ "$cm" = on ] && [ "$coopmat" = 0 ] && continue
        vk_step "$B" "--precision bf16 --coopmat $cm"
        echo "| B=$B | $cm | ${vms:-failed} | ${vtok:-failed} | $pms | $ptok | $(ratio) | $(mfu "$peak16") |" >>"$sum"
        jbf16="$jbf16${jbf16:+, }{\"batch\": $B, \"coopmat\": \"$cm\", \"vkgpt_ms_per_step\": \"${vms:-failed}\", \"vkgpt_tokens_per_s\": \"${vtok:-failed}\", \"pytorch_autocast_ms_per_step\": \"$pms\", \"pytorch_autocast_tokens_per_s\": \"$ptok\"}"
    done
done
dev=$("$here/vkgpt" devices 2>&1 | head -1 | sed 's/"/\\"/g')
printf '{"device": "%s", "tests": [%s], "train_gpt2_124m_t1024": [%s], "train_gpt2_124m_t1024_bf16": [%s]}\n' \
    "$dev" "$jtests" "$jtrain" "$jbf16" >"$json"
cat "$sum"
[ "$failed" = 0 ] || { echo "device-check: $failed test(s) failed (see $log)" >&2; exit 1; }
RUN
chmod +x "$dir/run.sh"
tar -czf "$dir.tar.gz" -C "$(dirname "$dir")" "$(basename "$dir")"
echo "device-check: $dir.tar.gz is $(du -h "$dir.tar.gz" | cut -f1)"
echo "device-check: packed $(ls "$dir" | wc -l) files and $(ls "$dir/lib" | wc -l) libraries into $dir ($(du -sh "$dir" | cut -f1))"
