"""The demo's table: speedups over plain decoding and over transformers' generate() side by side."""

from __future__ import annotations

from rich.console import Console
from specframe_smollm2.demo import GENERATE_LABEL, MethodRun, results_table

from specframe.metrics.records import GenerationResult, RoundRecord


def _result(tokens: list[int], seconds: float, rounds: int) -> GenerationResult:
    return GenerationResult(tokens=tokens, text="", prompt_len=5,
                            rounds=[RoundRecord(nodes=0, depth=0, accepted=0, committed=1) for _ in range(rounds)],
                            prefill_ns=1, total_ns=int(seconds * 1e9), stop_reason="length")


def test_the_table_quotes_the_plain_loops_gain_and_speculations_gain_apart() -> None:
    """Each method's speedup is over the plain loop (with its interval); only the plain loop is compared with
    generate(); no row carries the two gains multiplied (DARTree over generate() would be 2.0 x 1.25 = 2.5)."""
    from specframe_smollm2.demo import gains_footnote

    runs = {"plain decoding": MethodRun("plain decoding", results=[_result([1, 2, 3, 4], 2.0, 3),
                                                                   _result([1, 2, 3, 4], 4.0, 3)]),
            GENERATE_LABEL: MethodRun(GENERATE_LABEL, results=[_result([1, 2, 3, 4], 1.6, 3),
                                                               _result([1, 2, 3, 4], 3.2, 3)], note="default"),
            "DARTree": MethodRun("DARTree", results=[_result([1, 2, 3, 4], 1.0, 1), _result([1, 2, 3, 4], 2.0, 1)])}
    table, rows = results_table(runs, "plain decoding")
    by = {r["method"]: r for r in rows}
    assert by["DARTree"]["speedup"] == 2.0 and by["DARTree"]["speedup_vs_generate"] is None
    assert by["DARTree"]["speedup_interval"] == {"value": 2.0, "low": 2.0, "high": 2.0, "n": 2}
    assert by["plain decoding"]["speedup_vs_generate"] == 0.8 and by["plain decoding"]["vs_generate_interval"]["n"] == 2
    assert all(r["exact"] for r in rows)
    console = Console(width=220, record=True)
    console.print(table)
    text = console.export_text()
    assert "plain loop vs generate()" in text and "0.80x" in text and "2.00x [2.00, 2.00]" in text
    assert "2.50x" not in text
    note = "\n".join(gains_footnote(runs, "plain decoding"))
    assert "specframe's plain loop vs transformers' generate(): 0.80x [0.80, 0.80]" in note
    assert "speculation vs specframe's plain loop: DARTree 2.00x [2.00, 2.00]" in note and "2 prompts" in note
    _, rows = results_table({k: v for k, v in runs.items() if k != GENERATE_LABEL}, "plain decoding")
    assert rows[0]["speedup_vs_generate"] is None  # a target without generate(): no column values


def test_the_bf16_rows_are_skipped_where_bf16_is_not_native(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import io

    from rich.console import Console
    from specframe_smollm2.demo import bf16_pays

    import specframe.metrics.machine_info as machine_info

    monkeypatch.setattr(machine_info, "native_bf16", lambda device="cpu": False)
    out = io.StringIO()
    assert not bf16_pays("hi", Console(file=out, width=200))
    assert "not native on this CPU" in out.getvalue()
