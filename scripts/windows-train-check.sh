#!/bin/sh
# The Windows build trains as the Linux build does: a 20-step `vkgpt train` of a small GPT-2 on a
# byte-level text, run by the Linux vkgpt and by vkgpt.exe under Wine (the same lavapipe, the same
# SPIR-V), must log bitwise the same losses and gradient norms (log.jsonl prints floats with 9
# significant digits, which tell every float32 apart). Then checkpoints cross over: the checkpoint
# of step 10 written on Windows resumed to step 20 on Linux, and the one written on Linux resumed
# on Windows, must continue bitwise as the straight Linux run. Last, a 2-rank `vkgpt.exe launch`
# (its ranks started with CreateProcess in a job object, collectives over ZeroMQ tcp) must log
# bitwise the losses of the Linux launcher's 2 ranks over the same transport (--transport zmq:
# no shared memory, whose sums are ordered otherwise). Prints each comparison and the
# first differing step; exits 1 on any difference, and 1 without a Linux vkgpt to compare with
# (`make build` first: the comparison is the test, so it is never skipped).
# Runs under scripts/windows-test.sh (Xvfb, a wineserver), as the Windows build's test
# windows_train_matches_linux.
# Usage: scripts/windows-train-check.sh LINUX_VKGPT WINDOWS_VKGPT_EXE DEPS_PREFIX
set -eu

[ $# -eq 3 ] || {
    echo "windows-train-check: usage: windows-train-check.sh LINUX_VKGPT WINDOWS_VKGPT_EXE DEPS" >&2
    exit 2
}
linux=$1
win=$2
deps=$3
root=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$linux" ]; then
    echo "windows-train-check: no Linux vkgpt at $linux to compare with: build it first (make build)" >&2
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/vkg-wintrain-XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
cp "$root/README.md" text.txt
flags="--data text.txt --tokenizer byte --layers 2 --heads 2 --channels 32 --ctx 32 --batch 4
       --seq 32 --lr 3e-3 --seed 7 --sample-len 0 --ckpt-every 10"

run_linux() { # DIR STEPS [--resume]
    dir=$1 steps=$2
    shift 2
    # shellcheck disable=SC2086
    "$linux" train $flags --steps "$steps" --ckpt-dir "$dir" "$@" >"$dir.out" 2>&1 || {
        echo "windows-train-check: the Linux run into $dir failed:" >&2
        cat "$dir.out" >&2
        exit 1
    }
}

run_windows() { # DIR STEPS [--resume]
    dir=$1 steps=$2
    shift 2
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    sh "$root/scripts/wine-run.sh" --deps "$deps" "$win" train $flags --steps "$steps" \
        --ckpt-dir "$dir" "$@" >"$dir.out" 2>&1 || {
        echo "windows-train-check: the Windows run into $dir failed:" >&2
        cat "$dir.out" >&2
        exit 1
    }
    echo "  (vkgpt.exe train into $dir: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s under Wine)"
}

# The steps from..to of a run's log: "step loss grad_norm" per line.
losses() { # DIR FROM TO
    sed -n 's/^{"step":\([0-9]*\),"loss":\([^,]*\),"lr":[^,]*,"grad_norm":\([^,]*\),.*/\1 \2 \3/p' \
        "$1/log.jsonl" | awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b'
}

# The mean of the steps' times after the first (a sanity figure: lavapipe under Wine and not).
mean_ms() { # DIR
    sed -n 's/.*"step":\([0-9]*\),.*"ms":\([0-9.e+-]*\).*/\1 \2/p' "$1/log.jsonl" |
        awk '$1 > 1 { s += $2; n++ } END { printf "%.1f", n ? s / n : 0 }'
}

fail=0
same() { # WHAT DIR_A DIR_B FROM TO
    losses "$2" "$4" "$5" >a.txt
    losses "$3" "$4" "$5" >b.txt
    n=$(wc -l <a.txt)
    if [ "$n" -eq $(($5 - $4 + 1)) ] && cmp -s a.txt b.txt; then
        echo "$1: steps $4-$5 bitwise equal (last: step $(tail -n 1 a.txt))"
    else
        echo "$1: DIFFERENT (steps $4-$5); first difference:"
        diff a.txt b.txt | head -n 4
        fail=1
    fi
}

run_linux linux20 20
run_windows win20 20
same "20 steps, Linux vs Windows (Wine)" linux20 win20 1 20
echo "mean step time (steps 2-20): Linux $(mean_ms linux20) ms, Windows under Wine $(mean_ms win20) ms"
for f in model.bin state.bin; do
    if cmp -s "linux20/step_00000020/$f" "win20/step_00000020/$f"; then
        echo "the checkpoint's $f of step 20: byte for byte the same"
    else
        echo "the checkpoint's $f of step 20: DIFFERENT"
        fail=1
    fi
done

# A copy of a 20-step run's checkpoint folder as it stood at step 10 (the schedule depends on
# --steps, so the first half is the 20-step run's).
at_step10() { # FROM TO
    cp -r "$1" "$2"
    rm -rf "$2/step_00000020"
    head -n 10 "$1/log.jsonl" >"$2/log.jsonl"
}

at_step10 win20 w2l
run_linux w2l 20 --resume
same "checkpoint of step 10 written on Windows, resumed on Linux" linux20 w2l 11 20

at_step10 linux20 l2w
run_windows l2w 20 --resume
same "checkpoint of step 10 written on Linux, resumed on Windows" linux20 l2w 11 20

# Two ranks through each system's launcher; rank 0 writes the log.
# shellcheck disable=SC2086
"$linux" launch -n 2 --transport zmq -- train $flags --steps 10 --ckpt-dir linux_launch \
    >linux_launch.out 2>&1 || {
    echo "windows-train-check: the Linux launch failed:" >&2
    cat linux_launch.out >&2
    exit 1
}
t0=$(date +%s.%N)
# shellcheck disable=SC2086
sh "$root/scripts/wine-run.sh" --deps "$deps" "$win" launch -n 2 -- train $flags --steps 10 \
    --ckpt-dir win_launch >win_launch.out 2>&1 || {
    echo "windows-train-check: the Windows launch failed:" >&2
    cat win_launch.out >&2
    exit 1
}
echo "  (vkgpt.exe launch -n 2, 10 steps: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s under Wine)"
grep -q "^\[rank 1\] data parallel: rank 1 of 2" win_launch.out || {
    echo "windows-train-check: rank 1 of the Windows launch did not say it trained:" >&2
    cat win_launch.out >&2
    exit 1
}
same "2 ranks launched, Linux vs Windows (Wine)" linux_launch win_launch 1 10
echo "mean step time of 2 ranks (steps 2-10): Linux $(mean_ms linux_launch) ms, Windows under Wine $(mean_ms win_launch) ms"

# A rank that fails (no device 7) makes the launcher ask the other to stop (its stop event, as
# SIGTERM on POSIX): rank 0 stops by itself within the grace period, with the preemption code
# (75) or, when rank 1's abort reached it first, 1; the launcher exits with rank 1's code.
rc=0
# shellcheck disable=SC2086
sh "$root/scripts/wine-run.sh" --deps "$deps" "$win" launch -n 2 --devices 0,7 --grace 20 -- \
    train $flags --steps 1000000 --ckpt-dir win_fail >win_fail.crlf 2>&1 || rc=$?
tr -d '\r' <win_fail.crlf >win_fail.out # the launcher's own lines end in CR LF on Windows
if [ "$rc" -eq 2 ] &&
    grep -q "^vkgpt launch: rank 1 exited with status 2; stopping the other ranks" win_fail.out &&
    grep -Eq "^vkgpt launch: rank 0 exited with status (75|1)\$" win_fail.out; then
    echo "a failed rank under vkgpt.exe launch: the other stopped ($(sed -n 's/^vkgpt launch: rank 0 \(exited.*\)/\1/p' win_fail.out)); launch exit 2"
else
    echo "a failed rank under vkgpt.exe launch: DIFFERENT (exit $rc):"
    cat win_fail.out
    fail=1
fi
exit $fail
