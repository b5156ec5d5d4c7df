"""Secrets never leave the machine: names, shapes, near misses, and properties over any text."""

from __future__ import annotations

import json
import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.redaction import (
    REDACTED,
    is_secret_name,
    looks_like_secret,
    redact,
    redact_mapping,
    redact_obj,
    redact_pairs,
    redact_spec_dict,
    redact_text,
)

HF = "hf_Zq8xP2mK9vL4tR7wY1nB5cD3fG6hJ0sA"
SK = "sk-proj-4fQm8Zt2Lx9Vb7Nc1Rw5Ky3Hd"
GHP = "ghp_aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"
AKIA = "AKIAIOSFODNN7EXAMPLE"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
B64 = "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5z"

SECRET_NAMES = [
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "GITHUB_TOKEN",
    "--hf-token",
    "--api-key",
    "OPENAI_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "aws_secret_access_key",
    "apiKey",
    "x-api-key",
    "PGPASSWORD",
    "DB_PASSWORD",
    "MYSQL_PWD",
    "SECRET",
    "client_secret",
    "Authorization",
    "WANDB_API_KEY",
    "hftoken",
    "passphrase",
]
# Deliberate near misses: performance flags and variables a post-mortem must keep.
KEPT_NAMES = [
    "NCCL_ALGO",
    "--max-tokens",
    "max_tokens",
    "--max-total-tokens",
    "--speculative-num-draft-tokens",
    "TOKENIZERS_PARALLELISM",
    "--tokenizer-path",
    "--speculative-token-map",
    "HF_TOKEN_PATH",
    "KEY_VALUE_CACHE",
    "--kv-cache-dtype",
    "--ssl-keyfile",
    "PWD",
    "OLDPWD",
    "monkey",
    "CUDA_VISIBLE_DEVICES",
    "--tp",
    "--speculative-attention-mode",
    "accept_length",
    "output_tokens",
    "total_token_throughput",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names_are_recognised(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", KEPT_NAMES)
def test_near_miss_names_are_kept(name: str) -> None:
    assert not is_secret_name(name)


TEXT_CASES = [
    # (text, expected)
    (f"HF_TOKEN={HF} python -m sglang.launch_server", "HF_TOKEN=[REDACTED] python -m sglang.launch_server"),
    ("--api-key s3cr3t --port 8000", "--api-key [REDACTED] --port 8000"),
    ("--api-key=s3cr3t", "--api-key=[REDACTED]"),
    ("export OPENAI_API_KEY='two words'", "export OPENAI_API_KEY=[REDACTED]"),
    ('{"api_key": "abc", "max_tokens": 128}', '{"api_key": "[REDACTED]", "max_tokens": 128}'),
    ("password: hunter2", "password: [REDACTED]"),
    (f"loaded {HF} from cache", "loaded [REDACTED] from cache"),
    (f"client {SK}", "client [REDACTED]"),
    (f"push with {GHP}", "push with [REDACTED]"),
    (f"aws {AKIA} ok", "aws [REDACTED] ok"),
    (f"jwt {JWT}", "jwt [REDACTED]"),
    ("curl -H 'Authorization: Bearer abcdef123456'", "curl -H 'Authorization: Bearer [REDACTED]'"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [REDACTED]"),
    (
        "pip install --index-url https://me:pa55w0rd@pypi.example.com/simple",
        "pip install --index-url https://me:[REDACTED]@pypi.example.com/simple",
    ),
    (f"seed {B64} end", "seed [REDACTED] end"),
    ("GET /v1/models?token=abcdef&model=x", "GET /v1/models?token=[REDACTED]&model=x"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "[REDACTED]"),
    ("MYSQL_PWD=xyz PWD=/root", "MYSQL_PWD=[REDACTED] PWD=/root"),
]
KEPT_TEXT = [
    "NCCL_ALGO=Ring NCCL_PROTO=Simple",
    "--max-tokens 128 --speculative-num-steps 2 --speculative-attention-mode decode",
    "KEY_VALUE_CACHE=1 TOKENIZERS_PARALLELISM=false",
    "[2026-08-02 00:02:22] Decode batch, #running-req: 1, #full token: 181, full token usage: 0.00, "
    "accept len: 2.75, cuda graph: True, gen throughput (token/s): 17.39, #queue-req: 0",
    "[2026-02-26 20:26:06 TP5] Ignore import error when loading sglang.srt.models.glmasr: cannot import name "
    "'GlmAsrConfig' from 'transformers' (/root/ml-env/lib/python3.12/site-packages/transformers/__init__.py)",
    "commit 3eef625b90fa4780c0ffee00d15ea5e0badc0de1 request 123e4567-e89b-12d3-a456-426614174000",
    "model moonshotai/Kimi-K2-Instruct-0905 and meta-llama/Llama-3.1-8B-Instruct",
    "using basic attention backend; the bearer of bad news",
    "Maximum concurrency for 4096 tokens per request: 3.2x",
    "see https://github.com/sgl-project/sglang/blob/main/python/sglang/srt/server_args.py",
]


@pytest.mark.parametrize(("text", "expected"), TEXT_CASES)
def test_secrets_in_text_are_replaced(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize("text", KEPT_TEXT)
def test_ordinary_server_text_is_kept(text: str) -> None:
    assert redact_text(text) == text


@pytest.mark.parametrize("value", [HF, SK, GHP, AKIA, JWT, B64, "Bearer abcdef123456"])
def test_credential_shapes_are_recognised_as_values(value: str) -> None:
    assert looks_like_secret(value)


@pytest.mark.parametrize(
    "value",
    [
        "Ring",
        "128",
        "3eef625b90fa4780c0ffee00d15ea5e0badc0de1",
        "/data/eagle3",
        "moonshotai/Kimi-K2.5",
        "EAGLE3",
        REDACTED,
    ],
)
def test_ordinary_values_do_not_look_like_secrets(value: str) -> None:
    assert not looks_like_secret(value)


def test_mapping_pairs_and_spec_share_the_rules() -> None:
    env = {"HF_TOKEN": "anything", "NCCL_ALGO": "Ring", "CUSTOM": HF, "NESTED": {"password": 1234}}
    assert redact_mapping(env) == {
        "HF_TOKEN": REDACTED,
        "NCCL_ALGO": "Ring",
        "CUSTOM": REDACTED,
        "NESTED": {"password": REDACTED},
    }
    assert redact_pairs([("--api-key", "k"), ("--enable-x", None), ("--tp", 8)]) == [
        ["--api-key", REDACTED],
        ["--enable-x", None],
        ["--tp", 8],
    ]
    spec = {
        "engine": "sglang",
        "launcher": ["python", "-m", "sglang.launch_server"],
        "model": "m",
        "flags": [["--api-key", "k"], ["--max-tokens", "128"]],
        "env": [["HF_TOKEN", "x"], ["NCCL_ALGO", "Ring"]],
        "commit": "3eef625",
        "label": f"run with {HF}",
    }
    out = redact_spec_dict(spec)
    assert out["flags"] == [["--api-key", REDACTED], ["--max-tokens", "128"]]
    assert out["env"] == [["HF_TOKEN", REDACTED], ["NCCL_ALGO", "Ring"]]
    assert out["commit"] == "3eef625" and out["label"] == "run with [REDACTED]"
    assert redact({"note": "--api-key abc"}) == {"note": "--api-key [REDACTED]"}
    assert redact(f"x {HF}") == "x [REDACTED]"


def test_redact_obj_walks_any_json_tree_and_stays_json() -> None:
    tree = {
        "summary": {"output_throughput": 82.5},
        "evidence": [f"token {HF}", ["HF_TOKEN", "v"]],
        "settings": {"headers": {"Authorization": "Bearer abcdef123456"}},
    }
    out = redact_obj(tree)
    assert out["summary"] == {"output_throughput": 82.5}
    assert out["evidence"] == ["token [REDACTED]", ["HF_TOKEN", REDACTED]]
    assert out["settings"]["headers"]["Authorization"] == REDACTED
    json.dumps(out)


_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=80)
_DELIMITERS = st.sampled_from([" ", "\n", "\t", "=", ": ", "'", '"', ",", "(", " | "])


def _random_secret(seed: int, kind: int) -> str:
    rng = random.Random(seed)
    alnum = string.ascii_letters + string.digits
    body = "".join(rng.choice(alnum) for _ in range(36)) + "aZ9"
    return [
        f"hf_{body}",
        f"sk-{body}",
        f"ghp_{body}",
        "AKIA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16)),
        body,
    ][kind]


@settings(max_examples=200, deadline=None)
@given(
    before=_TEXT,
    after=_TEXT,
    left=_DELIMITERS,
    right=_DELIMITERS,
    seed=st.integers(0, 2**32),
    kind=st.integers(0, 4),
)
def test_a_credential_anywhere_in_text_is_removed(
    before: str, after: str, left: str, right: str, seed: int, kind: int
) -> None:
    secret = _random_secret(seed, kind)
    redacted = redact_text(f"{before}{left}{secret}{right}{after}")
    assert secret not in redacted
    assert secret[6:30] not in redacted


@settings(max_examples=300, deadline=None)
@given(text=_TEXT)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


def test_an_engine_count_named_token_is_kept_and_a_password_number_is_not() -> None:
    """SGLang's decode line ``#token: 221`` is parsed to ``{"token": 221}``: a KV-token count, kept."""
    row = {"running_req": 1, "token": 221, "full_token": 181.0, "token_usage": 0.01}
    assert redact_obj(row) == row
    assert redact_obj({"HF_TOKEN": "hf_x", "db_password": 1234, "api_key": True}) == {
        "HF_TOKEN": REDACTED, "db_password": REDACTED, "api_key": REDACTED}
