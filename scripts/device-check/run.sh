#!/bin/sh
# The device check, run on the GPU machine from the folder scripts/device-check.sh packed:
#   ./run.sh [--deadline SECONDS] [OUT]
# Order: the devices (stops at once, with the Vulkan loader's own reason, when none is usable);
# GPT-2 124M at T = 1024 against PyTorch on the same GPU: fp32, bf16 with --coopmat off and, where
# the device lists cooperative matrices, on, then the per-op profile of each; the shader tests
# with the validation layer (the cooperative-matrix kernel's first); `vkgpt bench ops` as it
# prints; the tiled matmul's table rows of the device's vendor. Every step runs under a time
# limit and the whole under the deadline (default 540 s); summary.md and summary.json in OUT
# (default ./out, or $OUT) are written as each step ends, so a cut run keeps its figures.
# Exit: 0 all passed, 1 a test failed, 3 no usable device. Environment: DEVCHECK_BATCHES (fp32
# batches, default "8"), DEVCHECK_BF16_BATCHES (default "8"), DEVCHECK_BENCH_OPS=0 and
# DEVCHECK_SWEEP=0 skip those steps, DEVCHECK_TEST_LIMIT (seconds a shader test may take, default
# 90), DEVCHECK_TRAIN_LIMIT (a training step's, default 120), DEVCHECK_CPU_OK=1 accepts a CPU
# device (lavapipe), VK_DRIVER_FILES as the loader reads it. See docs/DEVICE-CHECK.md.
here=$(cd "$(dirname "$0")" && pwd)
deadline=540
while [ $# -gt 0 ]; do
    case "$1" in
    --deadline) deadline=${2:?--deadline needs seconds}; shift 2 ;;
    --deadline=*) deadline=${1#--deadline=}; shift ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) break ;;
    esac
done
case "$deadline" in '' | *[!0-9]*) echo "run.sh: --deadline takes whole seconds, not '$deadline'" >&2; exit 2 ;; esac
out=${1:-${OUT:-$here/out}}
mkdir -p "$out" || exit 2
t0=$(date +%s)
end_at=$((t0 + deadline))
log="$out/device-check.log"
sum="$out/summary.md"
json="$out/summary.json"
: >"$log"

# Libraries: the bundle's own (the loader, libzmq, OpenBLAS...) first; from lib-fallback (Debian
# 12's libglvnd family, which NVIDIA's driver loads, and libstdc++/libgcc_s) only those the image
# lacks, so that an image's newer libstdc++ is never shadowed. python3 gets the caller's path.
caller_ld=${LD_LIBRARY_PATH-}
has_lib() {
    ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { f = 1 } END { exit !f }' && return 0
    for d in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64 /usr/local/nvidia/lib64; do
        [ -e "$d/$1" ] && return 0
    done
    return 1
}
taken=""
rm -rf "$out/lib-taken" && mkdir -p "$out/lib-taken"
for f in "$here"/lib-fallback/*; do
    [ -e "$f" ] || continue
    n=$(basename "$f")
    has_lib "$n" || { ln -s "$f" "$out/lib-taken/$n"; taken="$taken $n"; }
done
export LD_LIBRARY_PATH="$here/lib:$out/lib-taken${caller_ld:+:$caller_ld}"
export VK_LAYER_PATH="$here/layers"
if [ -z "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] &&
    [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi

# The summary: markdown appended as it goes, JSON rewritten after every step.
j_steps="" j_tests="" j_train="" stopped=""
js() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr '\n\t' '  '; }
write_json() {
    printf '{"device": "%s", "deadline_s": %s, "elapsed_s": %s, "stopped": "%s", "steps": [%s], "tests": [%s], "train_gpt2_124m_t1024": [%s]}\n' \
        "$(js "${devname:-}")" "$deadline" "$(($(date +%s) - t0))" "$(js "$stopped")" \
        "$j_steps" "$j_tests" "$j_train" >"$json.tmp" && mv "$json.tmp" "$json"
}
md() { printf '%s\n' "$*" >>"$sum"; }
# run_step NAME LIMIT FILE CMD...: CMD under LIMIT seconds (less when the deadline is nearer),
# its output in FILE and the log; sets rc (124: cut at its limit, 125: not run, no time left)
# and secs.
run_step() {
    name=$1 lim=$2 file=$3
    shift 3
    left=$((end_at - $(date +%s)))
    if [ "$left" -lt 5 ]; then
        echo "== $name: not run, the ${deadline} s deadline has passed" | tee -a "$log"
        : >"$file"; rc=125; secs=0; stopped="deadline (${deadline} s) reached before: $name"
        j_steps="$j_steps${j_steps:+, }{\"step\": \"$(js "$name")\", \"rc\": 125, \"seconds\": 0}"
        return 0
    fi
    [ "$lim" -gt "$left" ] && lim=$left
    echo "== $name (limit $lim s)" | tee -a "$log"
    s=$(date +%s)
    timeout -k 5 "$lim" "$@" >"$file" 2>&1
    rc=$?
    secs=$(($(date +%s) - s))
    [ "$rc" = 137 ] && rc=124
    cat "$file" >>"$log"
    [ "$rc" = 124 ] && echo "== $name: cut at its $lim s limit" | tee -a "$log"
    j_steps="$j_steps${j_steps:+, }{\"step\": \"$(js "$name")\", \"rc\": $rc, \"seconds\": $secs}"
    write_json
    return 0
}
field() { awk -v k="$1" '$1 == k { print $2; exit }' "$2"; }
cut_or() { if [ "$rc" = 124 ]; then echo "cut at $lim s"; elif [ "$rc" = 125 ]; then echo "not run (deadline)"; else echo "${1:-failed ($rc)}"; fi; }

md "# vkgpt device check, $(date -u '+%Y-%m-%d %H:%M UTC'), deadline $deadline s"
md ""
md "libraries taken from the bundle because the image lacks them:${taken:- none}"

# 1. The devices, with the loader's own reason when there is none to use.
VK_LOADER_DEBUG=error,warn "$here/vkgpt" devices >"$out/devices.txt" 2>"$out/loader.txt"
drc=$?
cat "$out/devices.txt" "$out/loader.txt" >>"$log"
devname=$(sed -n 's/^\[[0-9]*\] //p' "$out/devices.txt" | head -1)
gpu=$(grep -E '^ +vendor .*type (discrete|integrated|virtual)' "$out/devices.txt" | head -1)
[ -z "$gpu" ] && [ "${DEVCHECK_CPU_OK:-0}" = 1 ] && gpu=$(grep -E '^ +vendor ' "$out/devices.txt" | head -1)
if [ "$drc" != 0 ] || [ -z "$gpu" ]; then
    stopped="no usable Vulkan device (vkgpt devices exit $drc)"
    md ""
    md "**stopped: $stopped.** The devices found:"
    md '```'
    sed 's/^/    /' "$out/devices.txt" >>"$sum"
    md '```'
    md "The Vulkan loader's reason (VK_LOADER_DEBUG=error,warn; VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}):"
    md '```'
    cat "$out/loader.txt" >>"$sum"
    md '```'
    write_json
    cat "$sum"
    echo "device-check: stopped, no usable Vulkan device; the loader's reason is in $sum" >&2
    exit 3
fi
md ""
md "device: $devname"
grep -E '^ +(vendor|memory) ' "$out/devices.txt" | head -2 | sed 's/^ */    /' >>"$sum"
case "$gpu" in
*"(0x10de)"*) vendor=nvidia ;;
*"(0x1002)"*) vendor=amd ;;
*"(0x8086)"*) vendor=intel ;;
*"(0x106b)"*) vendor=apple ;;
*) vendor=other ;;
esac
# Datasheet peaks (dense, boost clock) where the device is known: fp32 on CUDA cores and bf16 on
# tensor cores, TFLOP/s; "" elsewhere.
case "$devname" in
*"H100 PCIe"*) peak32=51 peak16=756 ;;
*"H100 NVL"* | *"H200 NVL"*) peak32=60 peak16=835 ;;
*H100* | *H200*) peak32=67 peak16=989 ;;
*A100*) peak32=19.5 peak16=312 ;;
*) peak32="" peak16="" ;;
esac
[ -n "$peak32" ] && md "peaks (datasheet, dense): fp32 $peak32 TFLOP/s, bf16 tensor cores $peak16 TFLOP/s"
coopmat=0
grep -q 'f16\*f16+f32->f32 subgroup' "$out/devices.txt" && coopmat=1
write_json

# 2. GPT-2 124M, T = 1024, against PyTorch (run with the caller's library path, never the
# bundle's); PyTorch's own reason is kept when it cannot run.
if ! command -v python3 >/dev/null 2>&1; then
    torch_why="python3 not found"
elif tw=$(env LD_LIBRARY_PATH="$caller_ld" timeout 120 python3 -c 'import torch, sys
if not torch.cuda.is_available():
    sys.exit("torch %s (CUDA %s): torch.cuda.is_available() is False" % (torch.__version__, torch.version.cuda))' 2>&1); then
    torch_why=""
else
    torch_why=$(printf '%s\n' "$tw" | grep . | tail -1)
    torch_why=${torch_why:-python3 could not import torch}
fi
trlim=${DEVCHECK_TRAIN_LIMIT:-120}
model="--layers 12 --heads 12 --channels 768 --vocab 50257 --ctx 1024 --seq 1024"
vk_train() { # FILE LIMIT BATCH FLAGS...: vkgpt bench train
    f=$1 l=$2 b=$3
    shift 3
    run_step "vkgpt bench train B=$b $*" "$l" "$out/$f" "$here/vkgpt" bench train $model \
        --batch "$b" --steps 5 --warmup-steps 2 "$@"
    vms=$(field ms/step: "$out/$f")
    vtok=$(field tokens/s: "$out/$f")
    vms=$(cut_or "$vms")
}
pt_train() { # FILE BATCH PRECISION
    if [ -n "$torch_why" ]; then pms="-"; ptok="-"; return 0; fi
    run_step "pytorch B=$2 $3" 180 "$out/$1" env LD_LIBRARY_PATH="$caller_ld" python3 \
        "$here/pytorch_gpt2.py" --preset l4 $model --batch "$2" --steps 5 --warmup-steps 2 \
        --device cuda --precision "$3"
    pms=$(cut_or "$(field ms/step: "$out/$1")")
    ptok=$(field tokens/s: "$out/$1")
    ptok=${ptok:--}
}
# Model FLOPs utilization at vkgpt's tokens/s against peak $1: 6 N + 12 L C T FLOPs a token
# (PaLM's count; N = 124475904 parameters as vkgpt lays them out, L = 12, C = 768, T = 1024).
mfu() {
    case "$1:$vtok" in
    :* | *:) echo - ;;
    *) awk -v t="$vtok" -v p="$1" 'BEGIN { printf "%.1f%%", 100 * t * (6 * 124475904 + 12 * 12 * 768 * 1024) / (p * 1e12) }' ;;
    esac
}
ratio() { case "$vtok:$ptok" in :* | *:- | *:) echo - ;; *) awk -v a="$vtok" -v b="$ptok" 'BEGIN { printf "%.3f", a / b }' ;; esac; }
md ""
[ -n "$torch_why" ] && md "PyTorch: not run: $torch_why"
md ""
md "| GPT-2 124M, T=1024 | precision | vkgpt --coopmat | vkgpt ms/step | vkgpt tokens/s | PyTorch ms/step | PyTorch tokens/s | vkgpt / PyTorch | vkgpt MFU |"
md "|---|---|---|---|---|---|---|---|---|"
train_row() { # BATCH PRECISION COOPMAT
    pk=$peak32
    [ "$2" = bf16 ] && pk=$peak16
    md "| B=$1 | $2 | $3 | $vms | ${vtok:--} | $pms | $ptok | $(ratio) | $(mfu "$pk") |"
    j_train="$j_train${j_train:+, }{\"batch\": $1, \"precision\": \"$2\", \"coopmat\": \"$3\", \"vkgpt_ms_per_step\": \"$vms\", \"vkgpt_tokens_per_s\": \"${vtok:--}\", \"pytorch_ms_per_step\": \"$pms\", \"pytorch_tokens_per_s\": \"$ptok\"}"
    write_json
}
for B in ${DEVCHECK_BATCHES-8}; do
    pt_train "pytorch-fp32-b$B.txt" "$B" fp32
    vk_train "train-fp32-b$B.txt" "$trlim" "$B" --no-profile
    train_row "$B" fp32 -
done
# --coopmat per row: off, on (the forward products), grads (on, and the gradient products under a
# loss scale of 2^16: tensor cores in the whole step)
cms="off"
[ "$coopmat" = 1 ] && cms="off on grads"
cm_flags() { case "$1" in grads) echo "--coopmat on --loss-scale 65536" ;; *) echo "--coopmat $1" ;; esac; }
for B in ${DEVCHECK_BF16_BATCHES-8}; do
    pt_train "pytorch-bf16-b$B.txt" "$B" bf16
    for cm in $cms; do
        vk_train "train-bf16-coopmat-$cm-b$B.txt" "$trlim" "$B" --precision bf16 $(cm_flags "$cm") --no-profile
        train_row "$B" bf16 "$cm"
    done
done
# The per-op profiles (timestamp queries) of the same steps, fp32 and bf16 with each --coopmat;
# their files also list every dispatch in order (the time of each layer's each product).
B=$(echo ${DEVCHECK_BATCHES-8} ${DEVCHECK_BF16_BATCHES-8} | awk '{ print $1 }')
if [ -n "$B" ]; then
    for p in fp32 $(for cm in $cms; do echo "bf16:$cm"; done); do
        case "$p" in
        fp32) vk_train "profile-fp32.txt" "$trlim" "$B" --per-dispatch ;;
        *) vk_train "profile-bf16-coopmat-${p#bf16:}.txt" "$trlim" "$B" --precision bf16 $(cm_flags "${p#bf16:}") --per-dispatch ;;
        esac
        md ""
        case "$vms" in [0-9]*) vms="$vms ms/step" ;; esac
        md "per-op profile, B=$B $p: $vms"
        if grep -q '^per-op GPU time' "$out/$f"; then
            md '```'
            sed -n '/^per-op GPU time/,/^median wall step/p' "$out/$f" >>"$sum"
            md '```'
        fi
    done
fi

# 3. The shader tests with the validation layer: the cooperative-matrix kernel's own first.
failed=0
md ""
md "| test | result | seconds |"
md "|---|---|---|"
test_row() { # NAME FILE
    r=$(awk -v rc="$rc" -f "$here/classify.awk" "$2")
    [ "$rc" = 125 ] && r="not run (deadline)"
    case "$r" in
    pass) ;;
    layer*) r="pass; the layer's ${r#layer } message(s) on VK_KHR_cooperative_matrix, which it predates, set aside" ;;
    not*) ;;
    *) failed=$((failed + 1)) ;;
    esac
    md "| $1 | $r | $secs |"
    j_tests="$j_tests${j_tests:+, }{\"test\": \"$1\", \"result\": \"$(js "$r")\", \"seconds\": $secs}"
    write_json
}
tlim=${DEVCHECK_TEST_LIMIT:-90}
if [ "$coopmat" = 1 ] && [ -x "$here/coopmat_device" ]; then
    run_step coopmat_device "$tlim" "$out/test-coopmat_device.txt" "$here/coopmat_device"
    test_row coopmat_device "$out/test-coopmat_device.txt"
    if grep -q 'f16\*f16+f32->f32 subgroup (KHR)' "$out/devices.txt" &&
        grep -q 'f16\*f16+f32->f32 subgroup (NV)' "$out/devices.txt"; then
        run_step "coopmat_device KHR" "$tlim" "$out/test-coopmat_device_khr.txt" \
            env VKG_COOPMAT_KHR=1 "$here/coopmat_device"
        test_row "coopmat_device KHR" "$out/test-coopmat_device_khr.txt"
    fi
else
    md "| coopmat_device | not run: the device lists no f16 x f16 + f32 cooperative matrices | 0 |"
fi
for t in "$here"/test_*; do
    [ -x "$t" ] || continue
    n=$(basename "$t")
    run_step "$n" "$tlim" "$out/test-$n.txt" "$t"
    test_row "$n" "$out/test-$n.txt"
done

# 4. bench ops, passed through as it prints.
if [ "${DEVCHECK_BENCH_OPS:-1}" != 0 ]; then
    run_step "bench ops" 150 "$out/ops.txt" "$here/vkgpt" bench ops
    md ""
    md "bench ops: $(cut_or "exit $rc")"
    if [ -s "$out/ops.txt" ]; then
        md '```'
        cat "$out/ops.txt" >>"$sum"
        md '```'
    fi
    if [ -n "$peak32" ]; then # the products' GFLOP/s against the fp32 peak
        md "| matmul | shape | GFLOP/s | % of fp32 peak |"
        md "|---|---|---|---|"
        awk -v peak="$peak32" '/^matmul_(fwd|bwd)[a-z_]* / {
            shape = $2; for (i = 3; i < NF - 4; i++) shape = shape " " $i
            printf "| %s | %s | %s | %.1f |\n", $1, shape, $(NF - 3), $(NF - 3) / (peak * 10) }' \
            "$out/ops.txt" >>"$sum"
    fi
fi

# 4b. Where the device lists cooperative matrices: the bf16 forward products of the training step
# on the cooperative-matrix kernel beside the tiled kernel's fp32 ones (bench ops' fused section).
if [ "${DEVCHECK_BENCH_OPS:-1}" != 0 ] && [ "$coopmat" = 1 ]; then
    run_step "bench ops --coopmat on" 60 "$out/ops-coopmat.txt" "$here/vkgpt" bench ops \
        --coopmat on --op matmul_fwd --shape 'B8 T1024'
    md ""
    md "bench ops --coopmat on --op matmul_fwd --shape 'B8 T1024': $(cut_or "exit $rc")"
    if [ -s "$out/ops-coopmat.txt" ]; then
        md '```'
        grep -v '^#' "$out/ops-coopmat.txt" >>"$sum"
        md '```'
    fi
fi

# 5. The tiled matmul's table: the rows of the device's vendor, each double-buffered one also
# single buffered (+sb).
if [ "${DEVCHECK_SWEEP:-1}" != 0 ]; then
    md ""
    md "| tile sweep ($vendor rows) | result |"
    md "|---|---|"
    for e in $("$here/vkgpt" devices --tiles 2>/dev/null |
        awk -v v="$vendor-" 'index($1, v) == 1 { print $1; if (/double buffered/) print $1 "+sb" }'); do
        run_step "bench ops --op matmul --tiles $e" 60 "$out/sweep-$e.txt" \
            "$here/vkgpt" bench ops --op matmul --tiles "$e"
        md "| $e | $(cut_or "exit $rc") |"
        [ "$rc" = 125 ] && break
    done
fi

md ""
md "done in $(($(date +%s) - t0)) s${stopped:+; stopped: $stopped}"
write_json
cat "$sum"
[ "$failed" = 0 ] || { echo "device-check: $failed test(s) failed (see $log)" >&2; exit 1; }
exit 0
