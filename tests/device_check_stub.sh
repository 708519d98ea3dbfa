#!/bin/sh
# The device check's run.sh (scripts/device-check/) on stand-ins, in seconds:
#   tests/device_check_stub.sh SRC VKGPT WORKDIR
# 1. no usable device: with the real vkgpt and a driver manifest that is not there, and with only
#    a CPU device, run.sh stops at once (exit 3) with the Vulkan loader's own words;
# 2. a stand-in vkgpt whose bf16 step never ends: that step is cut at its limit, the fp32 figures
#    taken before it stay in summary.md and summary.json, and the deadline stops what is left;
# 3. stand-in tests: a cooperative-matrix (KHR) validation message is the layer's limitation, a
#    memory-model one and an assertion are failures; PyTorch's own reason is kept when it cannot
#    run, and python3 never sees the bundle's library path.
set -u
src=$1 vkgpt=$2 work=$3
fails=0
check() { # DESCRIPTION, then a command that must succeed
    d=$1
    shift
    if "$@"; then echo "ok: $d"; else echo "FAILED: $d" >&2; fails=$((fails + 1)); fi
}
has() { grep -q -e "$2" "$1"; }
hasnt() { ! grep -q -e "$2" "$1"; }
rm -rf "$work" && mkdir -p "$work/real" "$work/stub/lib" "$work/bin" || exit 1
for d in real stub; do
    cp "$src/scripts/device-check/run.sh" "$src/scripts/device-check/classify.awk" "$work/$d/" || exit 1
done

# 1. No usable device.
ln -s "$vkgpt" "$work/real/vkgpt"
s=$(date +%s)
VK_DRIVER_FILES=/nonexistent/vkgpt_icd.json sh "$work/real/run.sh" "$work/out-none" >/dev/null 2>&1
rc=$?
check "no driver: exit 3 (got $rc)" [ "$rc" = 3 ]
check "no driver: stopped within 30 s" [ $(($(date +%s) - s)) -lt 30 ]
check "no driver: the loader's reason in summary.md" has "$work/out-none/summary.md" "Found no drivers"
check "no driver: the manifest named" has "$work/out-none/summary.md" "/nonexistent/vkgpt_icd.json"
check "no driver: summary.json says it stopped" has "$work/out-none/summary.json" '"stopped": "no usable Vulkan device'
check "no driver: no step ran" has "$work/out-none/summary.json" '"steps": \[\]'
if "$vkgpt" devices 2>/dev/null | grep -q 'type cpu'; then
    env -u DEVCHECK_CPU_OK sh "$work/real/run.sh" "$work/out-cpu" >/dev/null 2>&1
    rc=$?
    check "a CPU device only: exit 3 (got $rc)" [ "$rc" = 3 ]
    check "a CPU device only: said so" has "$work/out-cpu/summary.md" "no usable Vulkan device"
fi

# 2. and 3. Stand-ins.
cat >"$work/stub/vkgpt" <<'EOF'
#!/bin/sh
case "$*" in
"devices --tiles")
    echo "tiled matmul table:"
    echo "  nvidia-small   32x 32x16:4x4  single buffered"
    echo "  nvidia-large  128x128x16:8x8  double buffered"
    echo "  amd-small      32x 32x16:4x4  single buffered" ;;
devices)
    echo "[0] Stand-in GPU"
    echo "    vendor NVIDIA (0x10de), type discrete, Vulkan 1.3, driver stand-in"
    echo "    memory 80 GiB device-local" ;;
"bench train"*"--precision bf16"*) echo "bf16 starting"; exec sleep 100 ;;
"bench train"*--no-profile*) printf 'ms/step: 123.45\ntokens/s: 66360.1\n' ;;
"bench train"*) printf 'ms/step: 125.00\ntokens/s: 65536.0\nper-op GPU time (stand-in)\nmatmul_fwd  37  10.00\nmedian wall step 125.00 ms\n' ;;
"bench ops") echo "matmul_fwd 768x768 stand-in stats: registers 96, spills 0" ;;
"bench ops --op matmul --tiles"*) echo "sweep $*" ;;
*) echo "stand-in vkgpt: $*" >&2; exit 2 ;;
esac
EOF
cat >"$work/stub/test_a_passes" <<'EOF'
#!/bin/sh
echo "[  PASSED  ] 3 test(s)."
EOF
cat >"$work/stub/test_b_layer_khr" <<'EOF'
#!/bin/sh
echo "[ RUN      ] test_khr"
echo "validation layer reported 4 message(s); first: Validation Error: [ VUID-VkDeviceCreateInfo-pNext-pNext ] pCreateInfo->pNext chain includes a structure with unknown VkStructureType (1000506000) (VkPhysicalDeviceCooperativeMatrixFeaturesKHR)"
echo "Could not run test: Test teardown failed"
echo "[  ERROR   ] test_khr"
exit 1
EOF
cat >"$work/stub/test_c_memory_model" <<'EOF'
#!/bin/sh
echo "[ RUN      ] test_routing"
echo "validation layer reported 6 message(s); first: Validation Error: [ VUID-RuntimeSpirv-vulkanMemoryModel-06265 ] vulkanMemoryModelDeviceScope is disabled, but"
echo "%148 = OpAtomicAnd %8 143 98 120 147"
echo "uses Device memory scope."
echo "Could not run test: Test teardown failed"
echo "[  ERROR   ] test_routing"
exit 1
EOF
cat >"$work/stub/test_d_assert_and_khr" <<'EOF'
#!/bin/sh
echo "[   LINE   ] --- tests/test_x.c:12: error: Failure!"
echo "validation layer reported 1 message(s); first: SPIR-V Capability CooperativeMatrixKHR unknown"
echo "[  ERROR   ] test_x"
exit 1
EOF
cat >"$work/bin/python3" <<'EOF'
#!/bin/sh
echo "${LD_LIBRARY_PATH-}" >>"$(dirname "$0")/../python-ld-path.txt"
echo "Traceback (most recent call last):" >&2
echo "ModuleNotFoundError: No module named 'torch'" >&2
exit 1
EOF
chmod +x "$work/stub/vkgpt" "$work/stub"/test_* "$work/bin/python3"
s=$(date +%s)
PATH="$work/bin:$PATH" LD_LIBRARY_PATH=/caller/lib DEVCHECK_TRAIN_LIMIT=2 DEVCHECK_TEST_LIMIT=5 \
    sh "$work/stub/run.sh" --deadline 40 "$work/out-stub" >/dev/null 2>&1
rc=$?
sum=$work/out-stub/summary.md json=$work/out-stub/summary.json
check "stand-ins: exit 1, two tests failed (got $rc)" [ "$rc" = 1 ]
check "stand-ins: within the deadline" [ $(($(date +%s) - s)) -lt 50 ]
check "fp32 figures kept" has "$sum" "| B=8 | fp32 | - | 123.45 | 66360.1 |"
check "fp32 figures in summary.json" has "$json" '"vkgpt_ms_per_step": "123.45"'
check "the bf16 step cut at its 2 s limit" has "$sum" '| B=8 | bf16 | off | cut at 2 s |'
check "the fp32 profile kept" has "$sum" 'matmul_fwd  37  10.00'
check "a cut step's rc in summary.json" has "$json" '"rc": 124'
check "PyTorch's reason kept" has "$sum" "PyTorch: not run: ModuleNotFoundError: No module named 'torch'"
check "python3 got the caller's library path" [ "$(sort -u "$work/python-ld-path.txt")" = /caller/lib ]
check "a passing test passes" has "$sum" '| test_a_passes | pass |'
check "a KHR cooperative-matrix message is the layer's" has "$sum" "| test_b_layer_khr | pass; the layer's 4 message(s) on VK_KHR_cooperative_matrix"
check "a memory-model message fails" has "$sum" '| test_c_memory_model | FAIL (1): .*vulkanMemoryModel-06265'
check "an assertion fails despite a KHR message" has "$sum" '| test_d_assert_and_khr | FAIL (1): .*test_x.c:12'
check "bench ops passed through" has "$sum" 'stats: registers 96, spills 0'
check "the sweep runs the vendor's rows" has "$sum" '| nvidia-large+sb | exit 0 |'
check "and no other vendor's" hasnt "$sum" 'amd-small'
check "no device had no coopmat step" has "$sum" '| coopmat_device | not run'

# The deadline: the first step overruns, everything after it is said not run, figures so far kept.
sed -i 's/^"bench train"\*--no-profile\*) printf.*/"bench train"*--no-profile*) exec sleep 100 ;;/' "$work/stub/vkgpt"
s=$(date +%s)
PATH="$work/bin:$PATH" sh "$work/stub/run.sh" --deadline 6 "$work/out-deadline" >/dev/null 2>&1
check "deadline: stopped by it" [ $(($(date +%s) - s)) -lt 30 ]
check "deadline: the step cut" has "$work/out-deadline/summary.md" '| B=8 | fp32 | - | cut at'
check "deadline: the rest not run" has "$work/out-deadline/summary.md" '| test_a_passes | not run (deadline)'
check "deadline: said in summary.json" has "$work/out-deadline/summary.json" '"stopped": "deadline (6 s) reached before'
[ "$fails" = 0 ] || { echo "device_check_stub: $fails check(s) failed; outputs in $work" >&2; exit 1; }
echo "device_check_stub: all checks passed"
