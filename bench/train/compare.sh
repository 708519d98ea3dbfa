#!/bin/sh
# Training-step throughput of vkgpt (`vkgpt bench train`) against PyTorch on the CPU
# (bench/train/pytorch_gpt2.py), measured in the same run, for the issue's L=4 config (preset l4)
# and the README's default fortunes model (preset default). Each measurement is taken REPEAT times,
# vkgpt and PyTorch alternating so that a change in machine load hits both, and the best
# (highest tokens/s) of each is kept. Prints a table with the ratio vkgpt / PyTorch; the full
# outputs (per-op breakdowns included) are kept in LOG_DIR.
#
# PyTorch runs twice per measurement: as installed, and with glibc malloc told to serve large
# blocks from its heap and keep freed memory (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_).
# As installed, every (B*T, Vp) logits-sized tensor is a fresh mmap whose pages fault in again each
# step, which on a VM with slow page faults costs PyTorch more than half of its l4 step; the
# second column is the stronger baseline (vkgpt allocates its arenas once).
#
# A name in PRESETS other than l4 and default is a model preset of the Llama family (llama-125m,
# smollm2-135m): `vkgpt bench train --model NAME` against bench/train/pytorch_llama.py --model
# NAME. BENCH_ARGS (e.g. "--layers 4 --batch 4 --seq 256") go to both sides.
#
# Usage: bench/train/compare.sh [BUILD_DIR]     (default BUILD_DIR: build)
# Environment: STEPS (timed steps, default 10), WARMUP (untimed steps, default 3),
#   THREADS (PyTorch threads, default 2), REPEAT (default 2), PRESETS (default "l4 default"),
#   BENCH_ARGS (default none),
#   PYTHON (default /usr/bin/python3, Debian's, which has python3-torch), LOG_DIR (default: a new
#   temporary folder), VKGPT_DEVICE (as for vkgpt).
# Prints figures only; nothing is asserted.
set -eu
BUILD=${1:-build}
VKGPT="$BUILD/vkgpt"
HERE=$(cd "$(dirname "$0")" && pwd)
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-3}
THREADS=${THREADS:-2}
REPEAT=${REPEAT:-2}
PRESETS=${PRESETS:-"l4 default"}
BENCH_ARGS=${BENCH_ARGS:-}
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x /usr/bin/python3 ] && PYTHON=/usr/bin/python3
fi
LOG_DIR=${LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/vkgpt-bench-train.XXXXXX")}
mkdir -p "$LOG_DIR"

[ -x "$VKGPT" ] || { echo "compare: $VKGPT not built (cmake --build $BUILD --target vkgpt_cli)" >&2; exit 1; }
"$PYTHON" -c "import torch" 2>/dev/null ||
    { echo "compare: $PYTHON cannot import torch (apt-get install python3-torch)" >&2; exit 1; }

# field FILE NAME: the number on the line "NAME: X" of FILE.
field() {
    awk -v k="$2:" '$1 == k { print $2; exit }' "$1"
}

# best OLD NEW: the larger of two numbers (OLD may be empty).
best() {
    awk -v a="${1:-0}" -v b="$2" 'BEGIN { print (b + 0 > a + 0) ? b : a }'
}

echo "# vkgpt bench train vs PyTorch: $STEPS timed steps after $WARMUP warm-up, best of $REPEAT runs each"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# PyTorch: $("$PYTHON" -c 'import torch; print(torch.__version__)'), $THREADS threads; logs in $LOG_DIR"

MALLOC_KEEP="MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736"

rows=""
for p in $PRESETS; do
    vk_tps="" vk_ms="" pt_tps="" pt_ms="" pm_tps="" pm_ms=""
    case "$p" in
    l4 | default) vk_sel="--preset $p" py="$HERE/pytorch_gpt2.py" py_sel="--preset $p" ;;
    *) vk_sel="--model $p" py="$HERE/pytorch_llama.py" py_sel="--model $p" ;;
    esac
    r=1
    while [ "$r" -le "$REPEAT" ]; do
        vlog="$LOG_DIR/vkgpt-$p-$r.txt"
        plog="$LOG_DIR/pytorch-$p-$r.txt"
        echo "# run $r: $p: vkgpt (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        # shellcheck disable=SC2086 # the selections and BENCH_ARGS are lists of words
        "$VKGPT" bench train $vk_sel $BENCH_ARGS --steps "$STEPS" --warmup-steps "$WARMUP" >"$vlog"
        t=$(field "$vlog" tokens/s)
        if [ "$(best "$vk_tps" "$t")" = "$t" ]; then vk_tps=$t vk_ms=$(field "$vlog" ms/step); cp "$vlog" "$LOG_DIR/vkgpt-$p-best.txt"; fi
        echo "# run $r: $p: pytorch (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        # shellcheck disable=SC2086
        "$PYTHON" "$py" $py_sel $BENCH_ARGS --steps "$STEPS" --warmup-steps "$WARMUP" \
            --threads "$THREADS" >"$plog"
        t=$(field "$plog" tokens/s)
        if [ "$(best "$pt_tps" "$t")" = "$t" ]; then pt_tps=$t pt_ms=$(field "$plog" ms/step); fi
        mlog="$LOG_DIR/pytorch-malloc-$p-$r.txt"
        echo "# run $r: $p: pytorch, $MALLOC_KEEP (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        # shellcheck disable=SC2086
        env $MALLOC_KEEP "$PYTHON" "$py" $py_sel $BENCH_ARGS --steps "$STEPS" \
            --warmup-steps "$WARMUP" --threads "$THREADS" >"$mlog"
        t=$(field "$mlog" tokens/s)
        if [ "$(best "$pm_tps" "$t")" = "$t" ]; then pm_tps=$t pm_ms=$(field "$mlog" ms/step); fi
        r=$((r + 1))
    done
    ratio=$(awk -v a="$vk_tps" -v b="$pt_tps" 'BEGIN { printf "%.2f", a / b }')
    ratio_m=$(awk -v a="$vk_tps" -v b="$pm_tps" 'BEGIN { printf "%.2f", a / b }')
    rows="$rows$(printf '| %s | %s (%s ms) | %s (%s ms) | %sx | %s (%s ms) | %sx |' "$p" \
        "$vk_tps" "$vk_ms" "$pt_tps" "$pt_ms" "$ratio" "$pm_tps" "$pm_ms" "$ratio_m")
"
done

echo
echo "| config | vkgpt tokens/s (ms/step) | PyTorch tokens/s (ms/step) | vkgpt/PyTorch |" \
    "PyTorch, malloc keeps memory | vkgpt/PyTorch (malloc) |"
echo "|---|---|---|---|---|---|"
printf '%s' "$rows"
echo
for p in $PRESETS; do
    echo "## vkgpt per-op breakdown, preset $p (best run)"
    sed -n '/^per-op GPU time/,$p' "$LOG_DIR/vkgpt-$p-best.txt"
    echo
done
