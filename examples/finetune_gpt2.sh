#!/bin/sh
# finetune_gpt2.sh: fine-tune a GPT-2 model (an llm.c checkpoint) on your own text with vkgpt.
#
#   sh examples/finetune_gpt2.sh [options] [TEXT_FILE]
#
# 1. prepare   tokenizes TEXT_FILE with GPT-2's BPE (vocab.bpe + encoder.json) into llm.c token
#              shards: OUT/data/train_000000.bin, OUT/data/val_000000.bin, OUT/data/tokenizer.bin
# 2. base      the llm.c model file to start from: -m FILE (for example llm.c's gpt2_124M.bin,
#              which llm.c's download script fetches; this script downloads nothing). Without -m
#              it trains a small GPT-2-vocabulary model for a few steps as a stand-in and uses
#              its checkpoint's model.bin, an llm.c file like any other.
# 3. fine-tune `vkgpt train --init MODEL` on the shards, with evaluation on the validation shard
#              when it holds at least one batch, checkpoints in OUT/finetune
# 4. sample    `vkgpt sample --ckpt OUT/finetune` continues a prompt
#
# Options:
#   -b VKGPT   the vkgpt binary (default: $VKGPT, else build/vkgpt in the source tree, else vkgpt
#              on the PATH)
#   -v DIR     folder with vocab.bpe and encoder.json (default: data/gpt2 of the source tree,
#              OpenAI's GPT-2 files shipped with vkgpt)
#   -m FILE    llm.c model file to fine-tune (fp32 or bf16; GPT-2 vocabulary)
#   -o DIR     output folder (default: finetune_out); its data, base and finetune subfolders
#              are replaced
#   -s N       steps for the stand-in base model and for fine-tuning (default: 30)
#   -B N, -T N micro-batch size and sequence length (default: 4 and 64)
#   -l LR      fine-tuning learning rate (default: 3e-4)
#   -p TEXT    sample prompt (default: "The keeper")
# Without TEXT_FILE a short built-in text is written to OUT/text.txt and used.
# Plain POSIX sh; the same on every platform vkgpt builds on. With the defaults and no -m it
# takes well under a minute on a CPU through lavapipe; a real gpt2_124M.bin wants a GPU.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
vkgpt=${VKGPT:-}
vocab="$here/../data/gpt2"
model=""
out="finetune_out"
steps=30
batch=4
seq=64
lr=3e-4
prompt="The keeper"

usage() {
    sed -n '2,30s/^# \{0,1\}//p' "$0" >&2
    exit "${1:-2}"
}

while getopts "b:v:m:o:s:B:T:l:p:h" opt; do
    case $opt in
    b) vkgpt=$OPTARG ;;
    v) vocab=$OPTARG ;;
    m) model=$OPTARG ;;
    o) out=$OPTARG ;;
    s) steps=$OPTARG ;;
    B) batch=$OPTARG ;;
    T) seq=$OPTARG ;;
    l) lr=$OPTARG ;;
    p) prompt=$OPTARG ;;
    h) usage 0 ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -le 1 ] || usage
text=${1:-}

die() {
    echo "finetune_gpt2.sh: $*" >&2
    exit 1
}

if [ -z "$vkgpt" ]; then
    if [ -x "$here/../build/vkgpt" ]; then
        vkgpt="$here/../build/vkgpt"
    elif command -v vkgpt >/dev/null 2>&1; then
        vkgpt=vkgpt
    else
        die "no vkgpt binary: build it (cmake --build build) or pass -b PATH"
    fi
fi
if [ ! -f "$vocab/vocab.bpe" ] || [ ! -f "$vocab/encoder.json" ]; then
    die "$vocab lacks vocab.bpe and encoder.json (OpenAI's GPT-2 BPE files): pass -v DIR"
fi
[ -z "$model" ] || [ -f "$model" ] || die "$model: no such model file"
case $steps in '' | *[!0-9]*) die "-s wants a whole number of steps, got '$steps'" ;; esac
[ "$steps" -ge 1 ] || die "-s wants at least 1 step"

mkdir -p "$out"
rm -rf "$out/data" "$out/base" "$out/finetune"

if [ -z "$text" ]; then
    text="$out/text.txt"
    cat >"$text" <<'EOF'
The keeper of the lighthouse rose before the sun, as he had done for thirty years. He climbed the
narrow stair, trimmed the wick, and wiped the salt from the great glass lens. From the gallery he
could see the whole bay: the fishing boats asleep at their moorings, the grey line of the cliffs,
and the long white road that ran down to the village.

The keeper liked the mornings best. The sea was quiet then, and the gulls had not yet begun their
quarrels. He wrote the weather in his book: wind from the west, light; sky clear; sea calm. Then
he made his tea and sat by the window to drink it, watching the light change on the water.

In the afternoon the keeper walked to the village for bread and news. The baker told him that a
storm was coming from the south. The fishermen said the same. The keeper thanked them and walked
home along the cliffs, watching the clouds build over the far hills.

The storm came in the night. The wind shook the tower and the rain beat against the glass. The
keeper did not sleep. He kept the lamp bright and the lens turning, and every hour he wrote the
weather in his book: wind from the south, strong; rain; sea rough. Far out in the dark a ship was
looking for the harbour, and the keeper's light showed it the way between the rocks.

In the morning the sea was grey and tired, and the ship lay safe at anchor in the bay. The captain
rowed ashore and climbed the hill to thank the keeper. They drank tea together by the window and
watched the gulls come back to the harbour. The keeper wrote in his book: wind from the west,
light; sky clearing; sea going down. Then he climbed the stair, trimmed the wick, and wiped the
salt from the great glass lens, as he had done for thirty years.
EOF
fi
[ -f "$text" ] || die "$text: no such text file"

echo "== 1. prepare: GPT-2 tokens from $text"
"$vkgpt" prepare --tokenizer gpt2 --vocab-dir "$vocab" --out "$out/data" --val-frac 0.2 "$text"

if [ -n "$model" ]; then
    echo "== 2. base model: $model"
else
    echo "== 2. base model: training a small stand-in GPT-2 ($steps steps; pass -m for a real one)"
    "$vkgpt" train --data "$out/data/train_*.bin" --layers 2 --heads 4 --channels 64 --ctx "$seq" \
        --batch "$batch" --seq "$seq" --steps "$steps" --lr 3e-3 --warmup 2 --ckpt-dir "$out/base" \
        --sample-len 0
    model="$out/base/step_$(printf '%08d' "$steps")/model.bin"
    [ -f "$model" ] || die "the base run left no $model"
fi

# Evaluate on the validation shard only when it holds one batch (1024-byte header, 2 bytes a token).
set -- --init "$model" --data "$out/data/train_*.bin"
val_bytes=$(wc -c <"$out/data/val_000000.bin")
if [ $(((val_bytes - 1024) / 2)) -gt $((batch * seq)) ]; then
    set -- "$@" --val-data "$out/data/val_*.bin" --eval-every $(((steps + 1) / 2)) --eval-batches 2
else
    echo "(the validation shard is shorter than one batch: no evaluation)"
fi

echo "== 3. fine-tune: $steps steps from $model"
"$vkgpt" train "$@" --batch "$batch" --seq "$seq" --steps "$steps" --lr "$lr" --warmup 2 \
    --ckpt-dir "$out/finetune" --sample-len 0

echo "== 4. sample from the fine-tuned model"
echo "--- sample ---"
"$vkgpt" sample --ckpt "$out/finetune" --vocab-dir "$vocab" --prompt "$prompt" --len 40 --seed 1
echo "--------------"
echo "done: fine-tuned model in $out/finetune/step_$(printf '%08d' "$steps")/model.bin"
