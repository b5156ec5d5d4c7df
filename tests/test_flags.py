"""Flag tables from real ``--help`` captures, and the problems validate() names.

The captures in tests/data/help are the engines' own output:
- sglang-0.5.23.txt: ``python -m sglang.launch_server --help`` of the sglang 0.5.23 wheel
  (its argparse builder run with torch and the GPU stack stubbed out; 80 columns);
- vllm-0.33.0-all.txt / vllm-0.33.0.txt: ``vllm serve --help=all`` and plain
  ``vllm serve --help`` of the vllm 0.33.0 wheel (same method, VLLM_TARGET_DEVICE=cpu);
- transformers-5.23.0.txt: ``transformers serve --help`` (transformers 5.23.0, typer
  0.29.2, which prints click's plain format);
- transformers-5.23.0-rich.txt: the same command registered on a ``typer.Typer`` with
  ``rich_markup_mode="rich"``, the boxed format older transformers releases printed.
"""

from __future__ import annotations

import doctest
import importlib.util
import pathlib
import subprocess
import sys

import pytest

from toolkit.errors import InvalidFlag
from toolkit.server import flag_check
from toolkit.server import help_table as flags_module
from toolkit.server.flag_check import FlagTableCache, check_flags, validate
from toolkit.server.help_table import parse_help

HELP = pathlib.Path(__file__).parent / "data" / "help"
CPU_VENV = pathlib.Path(__file__).resolve().parents[1] / ".venv-cpu"


def table(name: str, engine: str, version: str | None = None):
    return parse_help(
        (HELP / name).read_text(encoding="utf-8"), engine=engine, version=version, source=f"{engine} --help"
    )


SGLANG = table("sglang-0.5.23.txt", "sglang", "0.5.23")
VLLM = table("vllm-0.33.0-all.txt", "vllm", "0.33.0")
TRANSFORMERS = table("transformers-5.23.0.txt", "transformers", "5.23.0")
TRANSFORMERS_RICH = table("transformers-5.23.0-rich.txt", "transformers", "5.23.0")


def test_docstring_examples_run() -> None:
    assert doctest.testmod(flags_module).failed == 0
    assert doctest.testmod(flag_check).failed == 0


# --- parsing ---------------------------------------------------------------------------


def test_each_capture_parses_in_its_own_style() -> None:
    assert (SGLANG.style, len(SGLANG)) == ("argparse", 530)
    assert (VLLM.style, len(VLLM)) == ("argparse", 321)
    assert (TRANSFORMERS.style, len(TRANSFORMERS)) == ("click", 26)
    assert (TRANSFORMERS_RICH.style, len(TRANSFORMERS_RICH)) == ("rich", 22)


@pytest.mark.parametrize(
    ("tbl", "flag", "takes_value", "choices", "aliases"),
    [
        (SGLANG, "--speculative-attention-mode", True, ("prefill", "decode"), ()),
        (SGLANG, "--tp-size", True, None, ("--tensor-parallel-size",)),
        (SGLANG, "--model-path", True, None, ("--model",)),
        (SGLANG, "--enable-tf32-matmul", False, None, ("--no-enable-tf32-matmul",)),  # BooleanOptionalAction
        (SGLANG, "--enable-nccl-nvls", False, None, ()),
        (SGLANG, "--help", False, None, ("-h",)),
        (VLLM, "--tensor-parallel-size", True, None, ("-tp",)),
        (VLLM, "--enable-prefix-caching", False, None, ("--disable-prefix-caching",)),
        (VLLM, "--speculative-config", True, None, ("-sc",)),
        (VLLM, "--dtype", True, ("auto", "bfloat16", "float", "float16", "float32", "half"), ()),
        (TRANSFORMERS, "--reasoning", True, ("on", "off", "auto"), ()),
        (TRANSFORMERS, "--continuous-batching", False, None, ("--no-continuous-batching",)),
        (TRANSFORMERS, "--port", True, None, ()),
        (TRANSFORMERS, "--quiet", False, None, ("-q",)),
        (TRANSFORMERS, "--format", True, ("auto", "human", "agent", "json", "quiet"), ()),
        (TRANSFORMERS_RICH, "--reasoning", True, ("on", "off", "auto"), ()),
        (TRANSFORMERS_RICH, "--continuous-batching", False, None, ("--no-continuous-batching",)),
        (TRANSFORMERS_RICH, "--model-timeout", True, None, ()),
        (TRANSFORMERS_RICH, "--help", False, None, ()),  # rich shows "<bool>" for it: still a switch
    ],
)
def test_real_flags_are_read_as_the_engine_defines_them(tbl, flag, takes_value, choices, aliases) -> None:
    spec = tbl.lookup(flag)
    assert spec is not None
    assert (spec.name, spec.takes_value, spec.choices, spec.aliases) == (flag, takes_value, choices, aliases)


def test_vllm_open_choice_lists_are_suggestions_not_rules() -> None:
    parser = VLLM.lookup("--tool-call-parser")  # "{hermes,...} or name registered in --tool-parser-plugin"
    listed = VLLM.lookup("--kv-cache-dtype")  # "['auto', 'bfloat16', ...]": str | Literal[...]
    assert parser is not None and parser.choices is None and "hermes" in (parser.suggested_choices or ())
    assert listed is not None and listed.choices is None and "fp8_e4m3" in (listed.suggested_choices or ())
    assert validate({"--tool-call-parser": "my_plugin_parser", "--kv-cache-dtype": "fp8_e4m3"}, VLLM) == []


def test_groups_multiple_values_and_optional_values() -> None:
    assert VLLM.lookup("--tensor-parallel-size").group == "ParallelConfig"
    assert VLLM.lookup("--lora-modules").multiple
    text = "options:\n  --served-name [NAME]  A name.\n  --ids ID [ID ...]    Ids.\n"
    small = parse_help(text, engine="sim")
    assert small.lookup("--served-name").value_optional and not small.lookup("--served-name").multiple
    assert small.lookup("--ids").multiple and not small.lookup("--ids").value_optional


def test_older_typer_rich_rows_with_uppercase_metavars() -> None:
    text = (
        "╭─ Options ──────────────────────────────────────────────╮\n"
        "│ *  --model         TEXT            [required]           │\n"
        "│    --port          INTEGER         Server listen port.  │\n"
        "│    --reasoning     [on|off|auto]   Reasoning mode.      │\n"
        "│    --verbose   -v                  Verbose              │\n"
        "│    --help                          Show this message.   │\n"
        "╰────────────────────────────────────────────────────────╯\n"
    )
    rich = parse_help(text, engine="transformers")
    assert rich.style == "rich"
    assert [(s.name, s.takes_value, s.choices, s.aliases) for s in rich] == [
        ("--model", True, None, ()),
        ("--port", True, None, ()),
        ("--reasoning", True, ("on", "off", "auto"), ()),
        ("--verbose", False, None, ("-v",)),  # "Verbose" is help, not a metavar
        ("--help", False, None, ()),
    ]


def test_rich_and_plain_transformers_help_agree() -> None:
    for spec in TRANSFORMERS_RICH:
        plain = TRANSFORMERS.lookup(spec.name)
        assert plain is not None, spec.name
        assert (plain.takes_value, plain.choices) == (spec.takes_value, spec.choices)


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        # help text that wraps onto a line starting with "-" sits at the help column
        (
            "options:\n  --log-requests  Log:\n                        - INFO: ids\n                        --cb-x a\n",
            ("-", "--cb-x"),
        ),
        # a flag that only appears in the usage line is not a documented option
        (
            "usage: sglang serve [-h]\n                    [--only-in-usage X]\n\noptions:\n  -h, --help  help\n",
            ("--only-in-usage",),
        ),
        # vLLM's JSON epilog shows example invocations, not options
        (
            "options:\n  --kv-transfer-config KV_TRANSFER_CONFIG\n\nWhen passing JSON CLI arguments:\n"
            '   --json-arg \'{"key1": "value1"}\'\n   --json-arg.key1 value1\n',
            ("--json-arg",),
        ),
    ],
)
def test_lines_that_only_look_like_flags_are_not_flags(text: str, absent: tuple[str, ...]) -> None:
    parsed = parse_help(text, engine="sglang")
    assert all(parsed.lookup(name) is None for name in absent)


def test_vllm_short_help_is_refused_with_what_to_run_instead() -> None:
    with pytest.raises(ValueError, match=r"capture `vllm serve --help=all` instead"):
        table("vllm-0.33.0.txt", "vllm")


def test_text_without_flags_is_refused() -> None:
    with pytest.raises(ValueError, match="no flags found in the sglang help text"):
        parse_help(
            "Traceback (most recent call last):\n  ModuleNotFoundError: No module named 'torch'\n",
            engine="sglang",
        )


def test_to_frame_has_one_row_per_flag() -> None:
    frame = SGLANG.to_frame()
    assert list(frame.columns) == ["flag", "takes_value", "choices", "aliases", "group"]
    assert len(frame) == len(SGLANG)
    assert frame.set_index("flag").at["--speculative-attention-mode", "choices"] == "prefill, decode"


# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tbl", "flags", "expected"),
    [
        # the seed's fix, spelled right: nothing to say
        (
            SGLANG,
            {
                "--speculative-algorithm": "EAGLE3",
                "--speculative-num-steps": 2,
                "--speculative-attention-mode": "decode",
                "--tp-size": 8,
            },
            [],
        ),
        (
            SGLANG,
            {"--speculative-atention-mode": "decode"},
            [
                (
                    "unknown",
                    "unknown flag --speculative-atention-mode for sglang; did you mean --speculative-attention-mode?",
                )
            ],
        ),
        (
            SGLANG,
            {"--speculative-attention-mode": "decoder"},
            [
                (
                    "invalid_choice",
                    "--speculative-attention-mode must be one of prefill, decode; got 'decoder'",
                )
            ],
        ),
        (
            SGLANG,
            {"--frobnicate": None},
            [("unknown", "unknown flag --frobnicate for sglang; none of its 530 flags is close")],
        ),
        (
            SGLANG,
            {"--tp-size": None},
            [("missing_value", "--tp-size needs a value (TP_SIZE); it was given as a switch")],
        ),
        (
            SGLANG,
            {"--speculative-attention-mode": None},
            [
                (
                    "missing_value",
                    "--speculative-attention-mode needs a value (one of prefill, decode); it was given as a switch",
                )
            ],
        ),
        (
            SGLANG,
            {"--trust-remote-code": "1"},
            [("unexpected_value", "--trust-remote-code is a switch and takes no value; got '1'")],
        ),
        (SGLANG, {"--trust-remote-code": True, "--enable-nccl-nvls": False}, []),
        (SGLANG, [("--speculative-attention-mode=decode", None)], []),
        (SGLANG, {"--tensor-parallel-size": 8, "--model": "m"}, []),  # aliases
        # SGLang's argparse has no underscore spelling; vLLM's FlexibleArgumentParser does
        (
            SGLANG,
            {"--tp_size": 8},
            [("unknown", "unknown flag --tp_size for sglang; did you mean --tp-size?")],
        ),
        (VLLM, {"--tensor_parallel_size": 8, "--max_model_len": "32k"}, []),
        (VLLM, {"--compilation-config.mode": 3, "-tp": 8, "--disable-prefix-caching": None}, []),
        (
            VLLM,
            {"--max-model-length": 4096},
            [("unknown", "unknown flag --max-model-length for vllm; did you mean --max-model-len?")],
        ),
        (
            VLLM,
            {"--dtype": "bf16"},
            [
                (
                    "invalid_choice",
                    "--dtype must be one of auto, bfloat16, float, float16, float32, half; got 'bf16'",
                )
            ],
        ),
        (TRANSFORMERS, {"--reasoning": "auto", "--no-compile": None, "--port": 8001}, []),
        (
            TRANSFORMERS,
            {"--reasoning": "maybe"},
            [("invalid_choice", "--reasoning must be one of on, off, auto; got 'maybe'")],
        ),
    ],
)
def test_validate_names_every_problem(tbl, flags, expected) -> None:
    assert [(p.kind, p.message) for p in validate(flags, tbl)] == expected


def test_a_suggestion_comes_with_unknown_flags_and_bad_choices() -> None:
    typo, choice = validate(
        {"--speculative-atention-mode": "decode", "--speculative-attention-mode": "decoder"}, SGLANG
    )
    assert typo.suggestion == "--speculative-attention-mode"
    assert (choice.value, choice.suggestion) == ("decoder", "decode")


def test_argparse_prefixes_warn_or_fail_but_click_has_none() -> None:
    (abbrev,) = validate({"--speculative-attention": "decode"}, SGLANG)
    assert (abbrev.kind, abbrev.is_error, abbrev.suggestion) == (
        "abbreviation",
        False,
        "--speculative-attention-mode",
    )
    (bad_value,) = [p for p in validate({"--speculative-attention": "decoder"}, SGLANG) if p.is_error]
    assert bad_value.kind == "invalid_choice"  # the value is still checked against the flag it reaches
    (ambiguous,) = validate({"--speculative-a": "x"}, SGLANG)
    assert ambiguous.kind == "ambiguous" and ambiguous.message.startswith(
        "ambiguous flag --speculative-a for sglang: it could be --speculative-accept-threshold-acc, "
    )
    (click_prefix,) = validate({"--continuous": None}, TRANSFORMERS)
    assert click_prefix.kind == "unknown"


def test_check_flags_raises_once_with_every_error() -> None:
    with pytest.raises(InvalidFlag) as caught:
        check_flags(
            {
                "--speculative-atention-mode": "decode",
                "--speculative-attention-mode": "decoder",
                "--tp-size": 8,
            },
            SGLANG,
        )
    error = caught.value
    assert error.message == "2 flags would be rejected by sglang 0.5.23"
    assert error.evidence == (
        "unknown flag --speculative-atention-mode for sglang; did you mean --speculative-attention-mode?",
        "--speculative-attention-mode must be one of prefill, decode; got 'decoder'",
    )
    assert error.hint == "fix them to match `sglang --help` and launch again"


def test_check_flags_with_one_error_quotes_the_help_entry() -> None:
    with pytest.raises(InvalidFlag) as caught:
        check_flags({"--speculative-atention-mode": "decode"}, SGLANG)
    assert caught.value.message == (
        "unknown flag --speculative-atention-mode for sglang; did you mean --speculative-attention-mode?"
    )
    assert caught.value.evidence == ("--speculative-attention-mode {prefill,decode}",)


def test_check_flags_returns_warnings_without_raising() -> None:
    assert check_flags({"--tp-size": 8}, SGLANG) == ()
    (warning,) = check_flags({"--speculative-attention": "decode"}, SGLANG)
    assert warning.kind == "abbreviation"


# --- cache -----------------------------------------------------------------------------


def test_cache_runs_help_once_per_host_engine_and_version() -> None:
    cache = FlagTableCache()
    calls: list[str] = []

    def help_text() -> str:
        calls.append("ran")
        return (HELP / "sglang-0.5.23.txt").read_text(encoding="utf-8")

    first = cache.get_or_parse("gpu-a", "sglang", "0.5.23+g1a2b3c4", help_text)
    again = cache.get_or_parse("gpu-a", "sglang", "0.5.23+g1a2b3c4", help_text)
    other_host = cache.get_or_parse("gpu-b", "sglang", "0.5.23+g1a2b3c4", help_text)
    assert first is again and other_host is not first
    assert len(calls) == 2 and len(cache) == 2


def test_cache_never_keeps_a_table_of_unknown_version() -> None:
    cache = FlagTableCache()
    calls: list[str] = []

    def help_text() -> str:
        calls.append("ran")
        return "options:\n  --port PORT\n"

    cache.get_or_parse("gpu-a", "sglang", None, help_text)
    cache.get_or_parse("gpu-a", "sglang", None, help_text)
    assert len(calls) == 2 and len(cache) == 0 and cache.get("gpu-a", "sglang", None) is None


# --- live captures, when the programs exist here ----------------------------------------


@pytest.mark.realserver
@pytest.mark.skipif(
    not (CPU_VENV / "bin" / "transformers").exists(), reason=".venv-cpu is not built (make cpu-server)"
)
def test_live_transformers_serve_help_parses_like_the_capture() -> None:
    result = subprocess.run(
        [str(CPU_VENV / "bin" / "transformers"), "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    live = parse_help(result.stdout, engine="transformers")
    for name in ("--host", "--port", "--continuous-batching", "--model-timeout"):
        assert live.lookup(name) is not None, name


@pytest.mark.skipif(
    importlib.util.find_spec("toolkit.sim") is None
    or importlib.util.find_spec("toolkit.sim.__main__") is None,
    reason="the simulator (toolkit.sim) is not written yet",
)
def test_live_simulator_help_parses() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "toolkit.sim", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    sim = parse_help(result.stdout, engine="sim")
    assert sim.lookup("--help") is not None and len(sim) > 1


def test_metavars_with_commas_and_colons_are_flags_too() -> None:
    """The simulator's `--sim-drop-env-in-workers VAR,VAR` was once dropped from the table."""
    text = (
        "options:\n"
        "  --sim-drop-env-in-workers VAR,VAR\n"
        "                        start the TP workers without these variables\n"
        "  --dist-init-addr HOST:PORT\n"
        "                        where node 0 listens\n"
    )
    table = parse_help(text, engine="sglang")
    assert table.lookup("--sim-drop-env-in-workers") is not None
    assert table.lookup("--dist-init-addr") is not None
