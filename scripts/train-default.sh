#!/bin/sh
# The default run (`make train`): a small byte-level GPT-2 trained on the fortunes collection
# from Debian's fortunes package (about 2.3 million characters of English quips, quotations and
# stories), on whatever Vulkan device is present (lavapipe on a CPU-only machine), with progress,
# evaluation, samples, checkpoints, a JSON log and an SVG loss curve in runs/fortunes/.
# Running it again resumes the same run (delete runs/fortunes to start over).
# Usage: scripts/train-default.sh [BUILD_DIR]   (environment: VKGPT_RUN_DIR, VKGPT_STEPS)
set -eu
BUILD=${1:-build}
RUN=${VKGPT_RUN_DIR:-runs/fortunes}
STEPS=${VKGPT_STEPS:-1200}
VKGPT="$BUILD/vkgpt"
FORTUNES=/usr/share/games/fortunes

[ -x "$VKGPT" ] || { echo "train-default: $VKGPT not built (run make build)" >&2; exit 1; }
[ -d "$FORTUNES" ] || { echo "train-default: $FORTUNES missing (apt-get install fortunes)" >&2; exit 1; }

# Every fortune file except the index files and the two ASCII-art collections.
files=""
for f in "$FORTUNES"/*; do
    case "$f" in *.dat | *.u8 | */art | */ascii-art) continue ;; esac
    [ -f "$f" ] && files="$files $f"
done

mkdir -p "$RUN"
if [ ! -f "$RUN/data/train_000000.bin" ]; then
    # A line holding only % separates two fortunes: each becomes one document.
    "$VKGPT" prepare --out "$RUN/data" --tokenizer byte --val-frac 0.05 --split-on % $files
fi

exec "$VKGPT" train \
    --data "$RUN/data/train_*.bin" --val-data "$RUN/data/val_*.bin" \
    --layers 4 --heads 4 --channels 128 --ctx 64 \
    --batch 8 --seq 64 --steps "$STEPS" \
    --lr 2e-3 --warmup 50 --schedule cosine --lr-min-frac 0.1 --weight-decay 0.1 --grad-clip 1 \
    --eval-every 100 --eval-batches 8 --sample-every 400 --sample-len 200 \
    --ckpt-dir "$RUN" --ckpt-every 200 --resume
