#!/usr/bin/env bash
# Data parallelism over a slow link: two namespaced "hosts" (scripts/dp-netns.sh) joined by a
# veth pair limited to RATE, one rank each, training the same model with --sync step and
# --sync diloco (blocking and streaming); for each run rank 0's log gives the mean step time,
# the compute utilisation (sum of step - exposed communication over the sum of steps), the bytes
# each rank handed the collectives per step and the last training loss. Needs root (namespaces).
#
#   scripts/diloco-bench.sh RATE STEPS OUTDIR NAME -- [vkgpt train options]
#   e.g. scripts/diloco-bench.sh 100mbit 60 /tmp/b step-fp32 -- --data 'd/train_*.bin' ...
#
# Appends one line to OUTDIR/summary.txt:
#   NAME rate=RATE steps=N step_ms=... util=...% exch=...% MiB/step=... loss=...
# (exch: the exposed time of the steps whose pseudo-gradient bytes arrived, the outer exchange or
# a streaming piece, over the run's time; the rest of 100 - util is the per-step wait for the
# other rank)
# (the first 2 steps, start-up and the first exchange's connections, are left out of the means).
set -euo pipefail
[ $# -ge 5 ] && [ "$5" = "--" ] || {
    echo "usage: $0 RATE STEPS OUTDIR NAME -- [vkgpt train options]" >&2
    exit 2
}
RATE=$1 STEPS=$2 OUT=$3 NAME=$4
shift 5
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
LOG="$OUT/$NAME.jsonl"
rm -f "$LOG"
"$HERE/dp-netns.sh" --rate "$RATE" --ranks 2 -- --steps "$STEPS" --log "$LOG" --quiet "$@" \
    > "$OUT/$NAME.out" 2>&1 || { tail -5 "$OUT/$NAME.out" >&2; exit 1; }
python3 - "$LOG" "$NAME" "$RATE" >> "$OUT/summary.txt" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
m = [r for r in rows if r["step"] > 2]
ms = sum(r["ms"] for r in m)
exp = sum(r.get("exposed_comm_ms", 0.0) for r in m)
by = sum(r.get("comm_bytes", 0) for r in m) / len(m)
ex = sum(r.get("exposed_comm_ms", 0.0) for r in m if r.get("outer_bytes", 0) > 0)
print(f"{sys.argv[2]} rate={sys.argv[3]} steps={len(rows)} step_ms={ms / len(m):.0f} "
      f"util={100 * (1 - exp / ms):.1f}% exch={100 * ex / ms:.2f}% MiB/step={by / 2**20:.3f} "
      f"loss={rows[-1]['loss']:.4f}")
PY
tail -1 "$OUT/summary.txt"
