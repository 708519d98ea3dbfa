#!/usr/bin/env bash
# Two "hosts" on one machine: Linux network namespaces joined by a veth pair (optionally
# rate-limited with tc), each running ranks of `vkgpt train` started by torchrun-style
# variables, exactly as two real hosts would. Skips with a message (exit 0) where namespaces
# cannot be created (no root / CAP_SYS_ADMIN).
#
#   scripts/dp-netns.sh [--rate 1gbit] [--port 29511] [--ranks N] -- [vkgpt train options]
#   e.g. scripts/dp-netns.sh --rate 1gbit -- --data 'data/tiny/train_*.bin' --steps 20
#        scripts/dp-netns.sh --rate 1gbit --ranks 4 -- --pp 2 ...   (pipeline x data parallel)
#
# Even ranks run in namespace A at 10.77.0.1 (rank 0 is the master), odd ranks in namespace B at
# 10.77.0.2 (N ranks, default 2). With --pp 2 and 4 ranks (rank = stage x 2 + replica) each
# stage's two replicas are on different hosts, so the gradient sums cross the link and the
# activations between stages stay on a host. Output lines are prefixed with [host A rank R] /
# [host B rank R]. Everything is removed on exit.
set -euo pipefail
VKGPT=${VKGPT:-build/vkgpt}
RATE=""
PORT=29511
RANKS=2
while [ $# -gt 0 ]; do
    case "$1" in
    --rate) RATE=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "dp-netns: unknown option $1 (options before --: --rate R, --port P, --ranks N)" >&2
       exit 2 ;;
    esac
done
[ -x "$VKGPT" ] || { echo "dp-netns: $VKGPT is not built (set VKGPT=path)" >&2; exit 2; }
case "$RANKS" in
'' | *[!0-9]*) echo "dp-netns: --ranks wants an even number from 2, got '$RANKS'" >&2; exit 2 ;;
esac
if [ "$RANKS" -lt 2 ] || [ $((RANKS % 2)) -ne 0 ]; then
    echo "dp-netns: --ranks wants an even number from 2, got $RANKS" >&2
    exit 2
fi
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
run() { # rank namespace label local-rank
    ip netns exec "$2" env RANK="$1" WORLD_SIZE="$RANKS" LOCAL_RANK="$4" MASTER_ADDR=10.77.0.1 \
        MASTER_PORT="$PORT" VKG_JOB_ID="$JOB" "$VKGPT" train "${@:5}" 2>&1 | sed -u "s/^/[$3] /"
    return "${PIPESTATUS[0]}"
}
pids=""
for r in $(seq 0 $((RANKS - 1))); do
    if [ $((r % 2)) -eq 0 ]; then ns=$A host="host A"; else ns=$B host="host B"; fi
    run "$r" "$ns" "$host rank $r" $((r / 2)) "$@" &
    pids="$pids $!"
done
rc=0
for p in $pids; do
    wait "$p" || rc=$?
done
exit "$rc"
