"""Hostile pipeline files and overrides: each is one clear error (file, line, fix) from `validate`, never a hang,
a traceback, or a value that `validate` accepts and `run` refuses."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest

from specframe import PluginHost
from specframe.cli import run_cli
from specframe.config import load_pipeline_config
from specframe.config.bounds import MAX_TREE_NODES, SizeWarning

GOOD = """\
name: ngram
target: {type: hf, model: /models/none}
sampling: {temperature: 0.0}
budget: 8
drafter: {type: ngram, num_speculative_tokens: 8}
tree_builder: {type: chain}
pruner: {type: none}
verifier: {type: auto}
"""


def alias_bomb(levels: int = 9) -> str:
    """A billion-laughs document: a few hundred bytes expanding to 9 ** levels strings."""
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def validate(tmp_path: Path, text: str | bytes, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Exit status and stderr of `specframe validate` (whitespace collapsed: the console wraps long lines)."""
    path = tmp_path / "p.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    code = run_cli(["validate", str(path), *args], host=PluginHost())
    return code, " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize("text, message", [
    (alias_bomb(), "expands to more than"),
    ("a: &a [*a]\n", "recursive alias"),
    ("x: " + "[" * 5000 + "]" * 5000 + "\n", "nests more than"),
    (GOOD + "budget: 16\n", "duplicate key 'budget' (lines 4 and 9)"),
    (GOOD.replace("chain}", "chain, max_depth: 3, max_depth: 4}"), "duplicate key 'max_depth'"),
    (GOOD.encode("utf-16"), "UTF-16"),
    (GOOD.encode("utf-32"), "UTF-32"),
    (GOOD.encode() + b"name2: caf\xe9\n", "p.yaml:9: not UTF-8"),
    (GOOD.encode() + b"x: \x00\n", "NUL"),
    (GOOD.replace("name: ngram", 'name: "\\ud800"'), "p.yaml:1: a string holds a lone UTF-16 surrogate"),
    ("- a\n- b\n", "must be a YAML mapping, found a list"),
    ("just text\n", "must be a YAML mapping, found a string"),
    ("name: !!python/object:os.system x\n", "malformed YAML"),
    ("name: !!int abc\n", "cannot be read"),
    ("? [a, b]\n: c\n", "malformed YAML"),
])
def test_hostile_pipeline_files_are_one_screen_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      text: str | bytes, message: str) -> None:
    start = time.perf_counter()
    code, err = validate(tmp_path, text, capsys)
    assert code == 2 and message in err and "Traceback" not in err
    assert time.perf_counter() - start < 10


def test_a_huge_pipeline_file_is_refused_before_parsing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = validate(tmp_path, GOOD + "# " + "x" * (3 << 20) + "\n", capsys)
    assert code == 2 and "larger than 1 MiB" in err


def test_directories_and_missing_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["validate", str(tmp_path)], host=PluginHost()) == 2
    assert "is a directory" in capsys.readouterr().err
    (tmp_path / "f").write_text("x")
    assert run_cli(["validate", str(tmp_path / "f" / "p.yaml")], host=PluginHost()) == 2
    assert "a parent of it is a file" in " ".join(capsys.readouterr().err.split())


def test_an_alias_bomb_in_set_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bomb = "[" + ", ".join(f"&a{i} [{', '.join([f'*a{i - 1}'] * 9) if i else '1, 1, 1, 1, 1, 1, 1, 1, 1'}]"
                           for i in range(8)) + "]"
    code, err = validate(tmp_path, GOOD, capsys, "--set", f"budget={bomb}")
    assert code == 2 and "expands to more than" in err


@pytest.mark.parametrize("override, message", [
    ("sampling.temperature=.inf", "sampling.temperature"),
    ("sampling.temperature=.nan", "sampling.temperature"),
    ("sampling.top_p=.nan", "sampling.top_p"),
    ("generation.stop=['']", "stop string is empty"),
    ("generation.stop=['END', '']", "stop string is empty"),
    ("generation.max_new_tokens=1000000000000", "generation.max_new_tokens"),
    ("budget=1000000000", f"more than {MAX_TREE_NODES}"),
    ("tree_builder.max_depth=1000000000", "tree_builder.max_depth"),
    ("tree_builder.candidates=1000000000", "tree_builder.candidates"),
    ("tree_builder.budget=1000000000", "tree_builder.budget"),
    ("drafter.num_speculative_tokens=1000000000", "drafter.num_speculative_tokens"),
    ("drafter.max_ngram=1000000000", "drafter.max_ngram"),
    ("tree_builder={type: dartree, width: 1000000000}", "tree_builder.width"),
    ("tree_builder={type: sampled_tree, branching: [1000, 1000, 1000]}", "more than 4096 nodes"),
    ("corrector={type: random_gru, vocab_size: 1000000000000}", "corrector.vocab_size"),
    ("corrector={type: random_markov, seed: 100000000000000000000000}", "corrector.seed"),
    ("budget=true", "budget: got the boolean true"),
    ("sampling.temperature=yes", "sampling.temperature: got the boolean true"),
    ("drafter.num_speculative_tokens=true", "drafter.num_speculative_tokens: got the boolean true"),
])
def test_validate_refuses_what_would_fail_or_explode_at_run_time(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 override: str, message: str) -> None:
    code, err = validate(tmp_path, GOOD, capsys, "--set", override)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("stages, expected", [
    ("", 8),  # ngram: 8 depths x 1 candidate, chain
    ("--set=tree_builder={type: heap, max_depth: 3}", 3),
    ("--set=drafter={type: ngram, num_speculative_tokens: 2}", 2),
])
def test_a_budget_above_what_the_stages_produce_is_clamped_with_a_warning(
        tmp_path: Path, stages: str, expected: int) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(GOOD.replace("budget: 8", "budget: 4000"))
    overrides = (stages.split("=", 1)[1],) if stages else ()
    with pytest.warns(SizeWarning, match=f"budget 4000 is more than the {expected} draft nodes"):
        config, _ = load_pipeline_config(str(path), overrides, host=PluginHost())
    assert config.budget == expected


def test_a_budget_the_stages_can_fill_is_kept_and_the_default_is_clamped_silently(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(GOOD.replace("budget: 8", "budget: 6"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_pipeline_config(str(path), (), host=PluginHost())[0].budget == 6
        path.write_text(GOOD.replace("budget: 8\n", ""))
        assert load_pipeline_config(str(path), (), host=PluginHost())[0].budget == 8
        path.write_text(GOOD.replace("{type: ngram, num_speculative_tokens: 8}", "{type: none}"))
        assert load_pipeline_config(str(path), (), host=PluginHost())[0].budget == 8  # plain decoding: unused


def test_the_cli_prints_the_clamp_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = validate(tmp_path, GOOD.replace("budget: 8", "budget: 100"), capsys)
    assert code == 0 and "warning:" in err and "using budget 8" in err


def test_user_text_is_printed_without_markup_or_emoji(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli(["validate", str(tmp_path / "p.yaml"), "-h"], host=PluginHost())
    assert code == 0
    capsys.readouterr()
    path = tmp_path / "p.yaml"
    path.write_text(GOOD.replace("name: ngram", "name: '[red]x:-1: :smile:'"))
    assert run_cli(["validate", str(path)], host=PluginHost()) == 0
    assert "[red]x:-1: :smile:" in capsys.readouterr().out
    assert run_cli(["bench", str(path), "-d", "gsm8k:-1"], host=PluginHost()) == 2
    err = capsys.readouterr().err
    assert "gsm8k:-1:" in err and "\N{THUMBS DOWN SIGN}" not in err


def test_extends_graphs_that_load_exponentially_many_files_are_refused(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f30.yaml").write_text(GOOD)
    for i in range(30):  # each file extends the next one twice: 2 ** 30 loads without a limit
        (tmp_path / f"f{i}.yaml").write_text(f"extends: [f{i + 1}.yaml, f{i + 1}.yaml]\n")
    start = time.perf_counter()
    assert run_cli(["validate", str(tmp_path / "f0.yaml")], host=PluginHost()) == 2
    assert "loads more than 64 files" in " ".join(capsys.readouterr().err.split())
    assert time.perf_counter() - start < 10


def test_an_override_with_bytes_that_are_not_utf8_is_refused(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(GOOD)
    assert run_cli(["validate", str(path), "--set", "name=caf\udce9"], host=PluginHost()) == 2  # argv byte 0xe9
    assert "not UTF-8 in a command-line argument" in " ".join(capsys.readouterr().err.split())


def test_control_characters_in_a_pipeline_file_are_malformed_yaml(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, err = validate(tmp_path, GOOD + "x: \x07\n", capsys)
    assert code == 2 and "malformed YAML" in err and "special characters are not allowed" in err


@pytest.mark.parametrize("args, message", [
    (["bench", "--sweep", "budget=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]", "--sweep",
      "seed=[" + ", ".join(map(str, range(100))) + "]"], "the sweep has 1100 points"),
    (["bench", "--max-new-tokens", "100000000000"], "--max-new-tokens must be an integer from 1 to"),
    (["bench", "--repeats", "1000000000"], "not in the range"),
    (["bench", "--warmup", "1000000000"], "not in the range"),
])
def test_bench_arguments_that_would_run_forever_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            args: list[str], message: str) -> None:
    from tests.bench.toy_plugin import toy_host, write_pipeline

    data = Path(__file__).resolve().parents[1] / "bench" / "data"  # the suite's own small benchmark files
    pipeline = write_pipeline(tmp_path / "toy.yaml")
    start = time.perf_counter()
    code = run_cli([args[0], str(pipeline), "-d", "gsm8k:1", "--data-dir", str(data), "-o", str(tmp_path / "r.jsonl"),
                    *args[1:]], host=toy_host())
    captured = capsys.readouterr()
    assert code == 2 and message in " ".join((captured.err + captured.out).split())
    assert time.perf_counter() - start < 30 and not (tmp_path / "r.jsonl").exists()


@pytest.mark.parametrize("args, message", [
    (["--seed", "-1"], "not in the range"),
    (["--bootstrap", "1000000000000"], "not in the range"),
    (["--max-depth", "1000000000"], "not in the range"),
    (["--format", ","], "unknown or no format"),
])
def test_report_arguments_are_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                      message: str) -> None:
    from specframe.bench.results import ResultStore
    from tests.bench.test_report import fixture_records

    results = tmp_path / "r.jsonl"
    with ResultStore(results) as store:
        for record in fixture_records():
            store.append(record)
    code = run_cli(["report", str(results), *args], host=PluginHost())
    captured = capsys.readouterr()
    assert code == 2 and message in captured.err and "Traceback" not in captured.err


def test_plugin_text_in_tables_is_shown_literally(capsys: pytest.CaptureFixture[str]) -> None:
    import types
    from typing import Literal

    from specframe import ComponentConfig, ComponentSpec, hookimpl

    class OddConfig(ComponentConfig):
        type: Literal["odd"] = "odd"

    mod = types.ModuleType("odd_plugin")

    @hookimpl
    def specframe_drafters():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="drafter", name="odd", config=OddConfig, summary="[bold]tags[/bold] :-1:",
                            factory=lambda cfg, ctx: None)

    mod.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    host = PluginHost(autoload=False)
    host.register(mod, "odd")
    assert run_cli(["components", "--kind", "drafter"], host=host) == 0
    assert "[bold]tags[/bold] :-1:" in capsys.readouterr().out


def test_an_error_between_two_overrides_names_them_not_the_file(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, err = validate(tmp_path, GOOD, capsys, "--set", "drafter.min_ngram=5", "--set", "drafter.max_ngram=2")
    assert code == 2 and "error: --set drafter.min_ngram=5, --set drafter.max_ngram=2: drafter:" in err
    assert "p.yaml" not in err
    with_max = GOOD.replace("num_speculative_tokens: 8}", "num_speculative_tokens: 8, max_ngram: 3}")
    code, err = validate(tmp_path, with_max, capsys, "--set", "drafter.min_ngram=9")  # an override and a file line
    assert code == 2 and "p.yaml:5, --set drafter.min_ngram=9: drafter:" in err
    code, err = validate(tmp_path, GOOD, capsys, "--set", "budget=0")
    assert code == 2 and err.count("got 0") == 1
