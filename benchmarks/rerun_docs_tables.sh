#!/usr/bin/env bash
# Rerun every speed table of docs/benchmarks.md with the current checkpoints, one after the other, on a quiet
# machine: before each table it waits up to $WAIT_QUIET seconds (default 300) for the quiet rule of
# specframe/bench/quiet.py (1-minute load minus the benchmark's own threads below 0.3; the benchmark scripts apply it
# themselves and sample the load through their run) and stops when the machine stays busy; every record carries
# the CPU time other processes used, and `report` marks contended cells. Prompt sets come from $DATA (default
# ../shared/data; `specframe datasets` says where each set is found). Each named table is measured afresh (its old result
# file is removed first; within a run `bench` appends and resumes as usual); results go to docs/benchmarks/results/
# and the reports to docs/benchmarks/<name>/. One torch thread, the demo's setting.
# Usage (from any directory):
#   bash benchmarks/rerun_docs_tables.sh [name ...]     # default: every table
#   SMOKE=1 OUT=/tmp/tables bash benchmarks/rerun_docs_tables.sh   # smoke run: 1 prompt, 1 token, into $OUT
#   DRY_RUN=1 bash benchmarks/rerun_docs_tables.sh      # print the commands (one per line), run nothing
set -euo pipefail
cd "$(dirname "$0")/.."
smoke=${SMOKE:-0}
dry=${DRY_RUN:-0}
wait_quiet=${WAIT_QUIET:-300}  # a previous benchmark's own load takes a minute or two to decay
data=${DATA:-../shared/data}
export OMP_NUM_THREADS=1 SPECFRAME_CHECKPOINTS="${SPECFRAME_CHECKPOINTS:-$PWD/checkpoints/smollm2-135m}"
SF=.venv/bin/specframe
PY=.venv/bin/python
P=examples/smollm2
quiet() {  # the quiet rule before each table (not in a smoke or dry run)
    if [ "$smoke" = 0 ] && [ "$dry" = 0 ]; then "$PY" -m specframe.bench.quiet --wait "$wait_quiet"; fi
}
if [ "$smoke" = 0 ]; then
    OUT=${OUT:-docs/benchmarks}
    D="-d gsm8k:3 -d humaneval:3 --data-dir $data --max-new-tokens 48"
    MT="-d mt_bench:1"
    NGRAM="-d gsm8k:4 -d humaneval:4 -d mt_bench:2 -d alpaca:4 --data-dir $data --max-new-tokens 64"
    SCRIPT_SIZE=()
else  # a smoke run: every command at the smallest size, nothing written into docs/
    OUT=${OUT:?SMOKE=1 needs OUT=DIR (a smoke run never writes into docs/)}
    D="-d gsm8k:1 --data-dir $data --max-new-tokens 1 --warmup 0"
    MT=""
    NGRAM=$D
    SCRIPT_SIZE=(--smoke)
fi
R=$OUT/results
run_cmd() {  # print (DRY_RUN=1) or run one command
    if [ "$dry" = 1 ]; then printf '%q ' "$@"; echo; else "$@"; fi
}
run() {  # name, then bench arguments
    local name=$1; shift
    [ "$dry" = 1 ] || { quiet; mkdir -p "$R"; rm -f "$R/$name.jsonl"; }
    # shellcheck disable=SC2086  # $D, $MT: word-split on purpose
    run_cmd "$SF" bench "$@" -o "$R/$name.jsonl"
    run_cmd "$SF" report "$R/$name.jsonl" --out-dir "$OUT/$name"
}
names=("$@"); [ ${#names[@]} -gt 0 ] || names=(strategies budget width beta candidates ngram-smollm2 auto-budget
                                                batch-decoding simulator-validation)
for name in "${names[@]}"; do
    # shellcheck disable=SC2086
    case $name in
    strategies) run strategies $P/dflash-chain.yaml $P/domino-chain.yaml $P/ddtree.yaml \
        docs/benchmarks/pipelines/heap-sequential.yaml $P/domino-chain-ddtree.yaml $P/dartree-fixed.yaml \
        $P/dartree-pruned-b16.yaml $P/dartree-pruned.yaml $D $MT ;;
    budget) run budget $P/dartree-pruned.yaml --sweep "budget=[4,8,16,32,auto]" $D ;;
    width) run width $P/dartree-pruned-b16.yaml --sweep "tree_builder.width=[2,4,6,12]" $D ;;
    beta) run beta $P/dartree-pruned-b16.yaml --sweep "pruner.beta=[-0.4,-0.2,-0.1,0.0]" $D ;;
    candidates) run candidates $P/dartree-pruned-b16.yaml --sweep "drafter.top_k=[8,16,64]" $D ;;
    ngram-smollm2) run ngram-smollm2 examples/ngram-chain.yaml --sweep "drafter.num_speculative_tokens=[4,8]" \
        $NGRAM ;;
    auto-budget) run_cmd "$PY" benchmarks/auto_budget.py --n 20 --split report --max-new-tokens 64 --budgets 16 \
        --sets gsm8k,humaneval,mt_bench,alpaca,spec_bench/translation --methods dartree-pruned --data "$data" \
        --wait-quiet "$wait_quiet" "${SCRIPT_SIZE[@]}" --out "$OUT/auto-budget/results.json" ;;
    batch-decoding) run_cmd "$PY" benchmarks/batch_decoding.py --n 60 --split report --max-new-tokens 64 \
        --batch-sizes 1,2,4,8 --data "$data" --wait-quiet "$wait_quiet" "${SCRIPT_SIZE[@]}" \
        --out "$OUT/batch-decoding/results.json" ;;
    simulator-validation) run_cmd "$PY" benchmarks/simulator_validation.py --n 60 --split report \
        --max-new-tokens 64 --data "$data" --wait-quiet "$wait_quiet" "${SCRIPT_SIZE[@]}" \
        --out "$OUT/simulator/validation.json" ;;  # specframe simulate's validation table
    bf16-exactness) run_cmd "$PY" benchmarks/bf16_exactness.py --n 20 --split report --data "$data" \
        --wait-quiet "$wait_quiet" "${SCRIPT_SIZE[@]}" \
        --out "$OUT/bf16-exactness/results.json" ;;  # only where bf16 is native (its speeds)
    *) echo "unknown table $name" >&2; exit 2 ;;
    esac
done
