#!/usr/bin/env bash
# Rerun every speed table of docs/benchmarks.md with the current checkpoints, one after the other, on a quiet
# machine: it refuses to start when the 1-minute load average is above $MAX_LOAD (default 0.6), every record
# carries the CPU time other processes used, and `report` marks contended cells. Each named table is measured
# afresh (its old result file is removed first; within a run `bench` appends and resumes as usual); results go to
# docs/benchmarks/results/ and the reports to docs/benchmarks/<name>/. One torch thread, the demo's setting.
# Usage (repository root):
#   bash benchmarks/rerun_docs_tables.sh [name ...]     # default: every table
set -euo pipefail
cd "$(dirname "$0")/.."
load=$(cut -d' ' -f1 /proc/loadavg)
max=${MAX_LOAD:-0.6}  # raise it right after another benchmark of ours (its own load decays for a minute)
if awk "BEGIN{exit !($load > $max)}"; then echo "load average $load > $max: not benchmarking" >&2; exit 2; fi
export OMP_NUM_THREADS=1 SPECFRAME_CHECKPOINTS="${SPECFRAME_CHECKPOINTS:-$PWD/checkpoints/smollm2-135m}"
SF=.venv/bin/specframe
P=examples/smollm2
R=docs/benchmarks/results
D="-d gsm8k:3 -d humaneval:3 --data-dir ../shared/data --max-new-tokens 48"
run() {  # name, then bench arguments
    local name=$1; shift
    rm -f "$R/$name.jsonl"
    "$SF" bench "$@" -o "$R/$name.jsonl"
    "$SF" report "$R/$name.jsonl" --out-dir "docs/benchmarks/$name"
}
names=("$@"); [ ${#names[@]} -gt 0 ] || names=(strategies budget width beta candidates ngram-smollm2 auto-budget)
for name in "${names[@]}"; do
    case $name in
    strategies) run strategies $P/dflash-chain.yaml $P/domino-chain.yaml $P/ddtree.yaml \
        docs/benchmarks/pipelines/heap-sequential.yaml $P/domino-chain-ddtree.yaml $P/dartree-fixed.yaml \
        $P/dartree-pruned-b16.yaml $P/dartree-pruned.yaml $D -d mt_bench:1 ;;
    budget) run budget $P/dartree-pruned.yaml --sweep "budget=[4,8,16,32,auto]" $D ;;
    width) run width $P/dartree-pruned-b16.yaml --sweep "tree_builder.width=[2,4,6,12]" $D ;;
    beta) run beta $P/dartree-pruned-b16.yaml --sweep "pruner.beta=[-0.4,-0.2,-0.1,0.0]" $D ;;
    candidates) run candidates $P/dartree-pruned-b16.yaml --sweep "drafter.top_k=[8,16,64]" $D ;;
    ngram-smollm2) run ngram-smollm2 examples/ngram-chain.yaml --sweep "drafter.num_speculative_tokens=[4,8]" \
        -d gsm8k:4 -d humaneval:4 -d mt_bench:2 -d alpaca:4 --data-dir ../shared/data --max-new-tokens 64 ;;
    auto-budget) .venv/bin/python benchmarks/auto_budget.py --n 20 --split report --max-new-tokens 64 --budgets 16 \
        --methods dflash-chain,ddtree,domino-chain,dspark-chain,dartree-pruned --max-load "$max" \
        --out docs/benchmarks/auto-budget/results.json ;;
    bf16-exactness) .venv/bin/python benchmarks/bf16_exactness.py --n 20 --split report \
        --out docs/benchmarks/bf16-exactness/results.json ;;  # only where bf16 is native (its speeds)
    *) echo "unknown table $name" >&2; exit 2 ;;
    esac
done
