#!/usr/bin/env bash
# Two "hosts" on one machine: Linux network namespaces joined by a veth pair (optionally
# rate-limited with tc), each running one rank of `vkgpt train` started by torchrun-style
# variables, exactly as two real hosts would. Skips with a message (exit 0) where namespaces
# cannot be created (no root / CAP_SYS_ADMIN).
#
#   scripts/dp-netns.sh [--rate 1gbit] [--port 29511] -- [vkgpt train options]
#   e.g. scripts/dp-netns.sh --rate 1gbit -- --data 'data/tiny/train_*.bin' --steps 20
#
# Rank 0 runs in namespace A at 10.77.0.1 (the master), rank 1 in namespace B at 10.77.0.2.
# Output lines are prefixed with [host A] / [host B]. Everything is removed on exit.
set -euo pipefail
VKGPT=${VKGPT:-build/vkgpt}
RATE=""
PORT=29511
while [ $# -gt 0 ]; do
    case "$1" in
    --rate) RATE=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "dp-netns: unknown option $1 (options before --: --rate R, --port P)" >&2; exit 2 ;;
    esac
done
[ -x "$VKGPT" ] || { echo "dp-netns: $VKGPT is not built (set VKGPT=path)" >&2; exit 2; }
A=vkgA$$ B=vkgB$$ VA=vka$$ VB=vkb$$
if ! ip netns add "$A" 2>/dev/null; then
    echo "dp-netns: skipped: cannot create network namespaces here (needs root or CAP_SYS_ADMIN)"
    exit 0
fi
cleanup() {
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$B"
ip link add "$VA" type veth peer name "$VB"
ip link set "$VA" netns "$A"
ip link set "$VB" netns "$B"
ip -n "$A" addr add 10.77.0.1/24 dev "$VA"
ip -n "$B" addr add 10.77.0.2/24 dev "$VB"
for ns in "$A" "$B"; do ip -n "$ns" link set lo up; done
ip -n "$A" link set "$VA" up
ip -n "$B" link set "$VB" up
if [ -n "$RATE" ]; then
    ip netns exec "$A" tc qdisc add dev "$VA" root tbf rate "$RATE" burst 1mb latency 100ms
    ip netns exec "$B" tc qdisc add dev "$VB" root tbf rate "$RATE" burst 1mb latency 100ms
    echo "dp-netns: veth link limited to $RATE each way"
fi
JOB=$(printf '%016x' $(( ($$ << 20) ^ $(date +%s) )))
run() { # rank namespace label
    ip netns exec "$2" env RANK="$1" WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=10.77.0.1 \
        MASTER_PORT="$PORT" VKG_JOB_ID="$JOB" "$VKGPT" train "${@:4}" 2>&1 | sed -u "s/^/[$3] /"
    return "${PIPESTATUS[0]}"
}
run 0 "$A" "host A" "$@" & PA=$!
run 1 "$B" "host B" "$@" & PB=$!
rc=0
wait "$PA" || rc=$?
wait "$PB" || rc=$?
exit "$rc"
