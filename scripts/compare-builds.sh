#!/bin/sh
# Bitwise comparison of two builds of vkgpt on the same training runs: the proof a refactoring
# must give that it changed no number. Builds REV_A and REV_B (any git revisions; WORKTREE means
# the working tree as it is) in their own folders, runs on each, with the same data and seeds:
#   default   the README's fortunes model (scripts/train-default.sh's flags), first STEPS steps
#   l4        L=4 C=256 T=128 with GPT-2 BPE and 4 accumulation micro-steps per step
#   dp        `vkgpt launch -n 2` (ipc) on the default model, overlapped buckets of 1 MiB
#   zero      the same with --zero 1 (AdamW's moments sharded over the 2 ranks)
#   pp        `vkgpt launch -n 4` (ipc): 2 pipeline stages (1F1B) x 2 data-parallel ranks, 4
#             micro-batches per step
#   zb-h1     the pp run with --pp-schedule zb-h1 on build B (when it has the schedule), compared
#             with build A's pp run: the zero-bubble schedule trains bitwise as 1F1B
#   diloco    (when both builds have --sync) the dp run with --sync diloco, 3 inner steps and the
#             pseudo-gradient in int8, ending inside a round; its outer.bin compared too
# and, when both builds have --loss-scale (every path of the parallel strategies):
#   dp-whole  dp with one reduction after the backward pass (--no-overlap)
#   dp-bf16   dp with gradients exchanged in bf16;  dp3: dp on 3 ranks
#   zero-bf16 ZeRO-1 with bf16 gradients;  zero3: ZeRO-1 on 3 ranks
#   gpipe     the pp run with --pp-schedule gpipe;  pp-whole: pp with --no-overlap
#   pp-bf16   pp 2 x dp 2 in bf16;  pp3-bf16 / pp3: 2 stages x 3 data-parallel ranks (6 ranks)
#   pp-zero   pp 2 x dp 2 with --zero 1;  pp3-zero: the same on 2 x 3 ranks; pp-zero-bpe and
#             pp3-zero-bpe: the l4 model (GPT-2's vocabulary: wte holds the first stage's cuts)
#   diloco-f32-stream  DiLoCo in fp32 with 2 fragments streamed beside the inner steps
#   diloco3   DiLoCo int8 on 3 ranks;  diloco-pp: DiLoCo int8 under 2 stages x 2 replicas
#   auto      dp with --rank-batch auto;  loss-scale: dp with --loss-scale dynamic
# and compares, per run, every step's loss and gradient norm in log.jsonl and the final
# checkpoint's model.bin and state.bin byte for byte. Prints one line per run and exits 1 when
# any differs. Needs what `make build` needs, and the fortunes package for the data.
# Usage: scripts/compare-builds.sh REV_A REV_B [STEPS]      (e.g. main WORKTREE 50)
# Environment: VKG_COMPARE_DIR (scratch folder, default /tmp/vkgpt-compare; emptied first).
set -eu
[ $# -ge 2 ] || { echo "usage: scripts/compare-builds.sh REV_A REV_B [STEPS]" >&2; exit 2; }
cd "$(dirname "$0")/.."
src=$(pwd)
steps=${3:-50}
work=${VKG_COMPARE_DIR:-/tmp/vkgpt-compare}
fortunes=/usr/share/games/fortunes
[ -d "$fortunes" ] || { echo "compare-builds: $fortunes missing (apt-get install fortunes)" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"

# ---- builds ----
build() { # build REV NAME: the vkgpt binary of REV in $work/NAME/build/vkgpt
    if [ "$1" = WORKTREE ]; then
        mkdir -p "$work/$2"
        git ls-files -z --cached --others --exclude-standard | tar -C "$src" --null -T - -cf - |
            tar -C "$work/$2" -xf -
    else
        git worktree add -q --detach "$work/$2" "$1"
    fi
    cmake -S "$work/$2" -B "$work/$2/build" -DCMAKE_BUILD_TYPE=Release -DVKG_BUILD_TESTS=OFF \
        >"$work/$2.cmake.log"
    cmake --build "$work/$2/build" -j "$(nproc)" --target vkgpt_cli >"$work/$2.build.log"
    if [ "$1" = WORKTREE ]; then
        echo "compare-builds: built the working tree (on $(git rev-parse --short HEAD))"
    else
        echo "compare-builds: built $1 ($(git rev-parse --short "$1"))"
    fi
}
cleanup() {
    for n in a b; do
        [ -e "$work/$n/.git" ] && git worktree remove --force "$work/$n" 2>/dev/null
    done
    return 0
}
trap cleanup EXIT
build "$1" a
build "$2" b

# ---- data (prepared once, by build a) ----
files=""
for f in "$fortunes"/*; do
    case "$f" in *.dat | *.u8 | */art | */ascii-art) continue ;; esac
    [ -f "$f" ] && files="$files $f"
done
# shellcheck disable=SC2086 # a list of files
"$work/a/build/vkgpt" prepare --out "$work/bytes" --tokenizer byte --val-frac 0.05 --split-on % \
    $files >"$work/prepare.log"
# shellcheck disable=SC2086
"$work/a/build/vkgpt" prepare --out "$work/bpe" --tokenizer gpt2 --vocab-dir "$src/data/gpt2" \
    --val-frac 0.05 --split-on % $files >>"$work/prepare.log"

# ---- runs ----
run() { # run NAME BUILD[.TAG] VKGPT-ARGS...: logs and checkpoints in $work/runs/NAME.BUILD[.TAG]
    name=$1 b=${2%%.*} tag=$2
    shift 2
    out=$work/runs/$name.$tag
    mkdir -p "$work/runs"
    "$work/$b/build/vkgpt" "$@" --ckpt-dir "$out" >"$out.log" 2>&1 ||
        { echo "compare-builds: $name on build $b failed; see $out.log" >&2; tail -n 5 "$out.log" >&2; exit 1; }
}
default_model="--layers 4 --heads 4 --channels 128 --ctx 64 --batch 8 --seq 64 --lr 2e-3 --warmup 5
    --schedule cosine --lr-min-frac 0.1 --weight-decay 0.1 --grad-clip 1 --sample-len 0"
for b in a b; do
    # shellcheck disable=SC2086 # flag lists
    run default $b train --data "$work/bytes/train_*.bin" $default_model --steps "$steps"
    run l4 $b train --data "$work/bpe/train_*.bin" --layers 4 --heads 4 --channels 256 --ctx 128 \
        --batch 8 --seq 128 --total-batch 4096 --steps 5 --lr 1e-3 --sample-len 0
    # shellcheck disable=SC2086
    run dp $b launch -n 2 --transport ipc -- train --data "$work/bytes/train_*.bin" \
        $default_model --steps 10 --bucket-mb 1
    # shellcheck disable=SC2086
    run zero $b launch -n 2 --transport ipc -- train --data "$work/bytes/train_*.bin" \
        $default_model --steps 10 --bucket-mb 1 --zero 1
    # shellcheck disable=SC2086
    run pp $b launch -n 4 --transport ipc -- train --data "$work/bytes/train_*.bin" \
        $default_model --steps 10 --pp 2 --total-batch 4096
done
names="default l4 dp zero pp"
if "$work/b/build/vkgpt" train --help 2>&1 | grep -q zb-h1; then
    # shellcheck disable=SC2086
    run pp b.zb launch -n 4 --transport ipc -- train --data "$work/bytes/train_*.bin" \
        $default_model --steps 10 --pp 2 --total-batch 4096 --pp-schedule zb-h1
    ln -s "$work/runs/pp.a" "$work/runs/zb-h1.a" && ln -s "$work/runs/pp.b.zb" "$work/runs/zb-h1.b"
    names="$names zb-h1"
fi

if "$work/a/build/vkgpt" train --help 2>&1 | grep -q -- --sync &&
    "$work/b/build/vkgpt" train --help 2>&1 | grep -q -- --sync; then
    for b in a b; do
        # shellcheck disable=SC2086
        run diloco $b launch -n 2 --transport ipc -- train --data "$work/bytes/train_*.bin" \
            $default_model --steps 10 --sync diloco --inner-steps 3 --outer-dtype int8
    done
    names="$names diloco"
fi

if "$work/a/build/vkgpt" train --help 2>&1 | grep -q -- --loss-scale &&
    "$work/b/build/vkgpt" train --help 2>&1 | grep -q -- --loss-scale; then
    bytes="--data $work/bytes/train_*.bin"
    for b in a b; do
        # shellcheck disable=SC2086 # flag lists
        {
            run dp-whole $b launch -n 2 --transport ipc -- train $bytes $default_model --steps 10 --no-overlap
            run dp-bf16 $b launch -n 2 --transport ipc -- train $bytes $default_model --steps 10 --bucket-mb 1 --grad-dtype bf16
            run dp3 $b launch -n 3 --transport ipc -- train $bytes $default_model --steps 10 --bucket-mb 1
            run zero-bf16 $b launch -n 2 --transport ipc -- train $bytes $default_model --steps 10 --bucket-mb 1 --zero 1 --grad-dtype bf16
            run zero3 $b launch -n 3 --transport ipc -- train $bytes $default_model --steps 10 --bucket-mb 1 --zero 1
            run gpipe $b launch -n 4 --transport ipc -- train $bytes $default_model --steps 10 --pp 2 --total-batch 4096 --pp-schedule gpipe
            run pp-whole $b launch -n 4 --transport ipc -- train $bytes $default_model --steps 10 --pp 2 --total-batch 4096 --no-overlap
            run pp-bf16 $b launch -n 4 --transport ipc -- train $bytes $default_model --steps 10 --pp 2 --total-batch 4096 --bucket-mb 1 --grad-dtype bf16
            run pp3 $b launch -n 6 --transport ipc -- train $bytes $default_model --steps 6 --pp 2 --total-batch 6144 --bucket-mb 1
            run pp3-bf16 $b launch -n 6 --transport ipc -- train $bytes $default_model --steps 6 --pp 2 --total-batch 6144 --bucket-mb 1 --grad-dtype bf16
            run pp-zero $b launch -n 4 --transport ipc -- train $bytes $default_model --steps 10 --pp 2 --total-batch 4096 --zero 1
            run pp3-zero $b launch -n 6 --transport ipc -- train $bytes $default_model --steps 6 --pp 2 --total-batch 6144 --zero 1
            run pp-zero-bpe $b launch -n 4 --transport ipc -- train --data "$work/bpe/train_*.bin" --layers 4 --heads 4 --channels 256 --ctx 128 --batch 8 --seq 128 --total-batch 8192 --steps 4 --lr 1e-3 --sample-len 0 --pp 2 --zero 1
            run pp3-zero-bpe $b launch -n 6 --transport ipc -- train --data "$work/bpe/train_*.bin" --layers 4 --heads 4 --channels 256 --ctx 128 --batch 8 --seq 128 --total-batch 12288 --steps 3 --lr 1e-3 --sample-len 0 --pp 2 --zero 1
            run diloco-f32-stream $b launch -n 2 --transport ipc -- train $bytes $default_model --steps 10 --sync diloco --inner-steps 4 --fragments 2
            run diloco3 $b launch -n 3 --transport ipc -- train $bytes $default_model --steps 8 --sync diloco --inner-steps 3 --outer-dtype int8
            run diloco-pp $b launch -n 4 --transport ipc -- train $bytes $default_model --steps 8 --pp 2 --total-batch 4096 --sync diloco --inner-steps 3 --outer-dtype int8
            run auto $b launch -n 2 --transport ipc -- train $bytes $default_model --steps 10 --rank-batch auto
            run loss-scale $b launch -n 2 --transport ipc -- train $bytes $default_model --steps 10 --loss-scale dynamic --loss-scale-window 3
        }
    done
    names="$names dp-whole dp-bf16 dp3 zero-bf16 zero3 gpipe pp-whole pp-bf16 pp3 pp3-bf16 pp-zero pp3-zero pp-zero-bpe pp3-zero-bpe diloco-f32-stream diloco3 diloco-pp auto loss-scale"
fi

# ---- comparison ----
fields() { # the loss and gradient norm of every step of a log.jsonl
    sed -n 's/.*"step":\([0-9]*\),"loss":\([^,]*\),.*"grad_norm":\([^,]*\),.*/\1 \2 \3/p' "$1"
}
last_ckpt() { # the newest step_* folder holding DONE
    for d in $(ls -d "$1"/step_* 2>/dev/null | sort -r); do
        [ -f "$d/DONE" ] && { echo "$d"; return; }
    done
}
splits() { # the --rank-batch auto decisions of a run's log
    sed -n 's/.*\(step [0-9]*: --rank-batch auto [a-z0-9, ]*\) (.*/\1/p' "$1"
}
status=0
for name in $names; do
    ra=$work/runs/$name.a rb=$work/runs/$name.b
    if [ "$name" = auto ] && [ "$(splits "$ra.log")" != "$(splits "$rb.log")" ]; then
        # the split follows the ranks' measured speed: on a loaded machine two runs may choose
        # different ones, and then they add in another order by design (test_rebalance proves
        # auto bitwise against the fixed splits it chose)
        echo "auto: not compared (the measured speeds chose different splits: a $(splits "$ra.log" |
            tr '\n' ' ')| b $(splits "$rb.log" | tr '\n' ' '))"
        continue
    fi
    fields "$ra/log.jsonl" >"$ra.fields"
    fields "$rb/log.jsonl" >"$rb.fields"
    ca=$(last_ckpt "$ra") cb=$(last_ckpt "$rb")
    n=$(wc -l <"$ra.fields")
    if [ "$n" -eq 0 ] || [ -z "$ca" ] || [ -z "$cb" ]; then
        echo "$name: FAIL (no steps or no checkpoint; see $ra.log and $rb.log)"
        status=1
    elif ! cmp -s "$ra.fields" "$rb.fields"; then
        echo "$name: FAIL (losses or norms differ from the first line shown)"
        diff "$ra.fields" "$rb.fields" | head -n 4
        status=1
    elif ! cmp -s "$ca/model.bin" "$cb/model.bin" || ! cmp -s "$ca/state.bin" "$cb/state.bin" ||
        { [ -f "$ca/outer.bin" ] && ! cmp -s "$ca/outer.bin" "$cb/outer.bin"; }; then
        echo "$name: FAIL (same losses, but the checkpoints $ca and $cb differ)"
        status=1
    else
        echo "$name: bitwise equal ($n steps: losses, gradient norms, $(basename "$ca") model.bin and state.bin)"
    fi
done
exit $status
