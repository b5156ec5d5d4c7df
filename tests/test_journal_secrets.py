"""A secret handed to the journal through any door never reaches the bytes of the SQLite files."""

from __future__ import annotations

import dataclasses
import random
import string
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from journal_data import bench_result, decode_line, events, metric_rows, readiness

from toolkit.errors import CommandFailed
from toolkit.journal import Journal, SourceRepo, StepRecorder
from toolkit.journal.adapters import clone_url
from toolkit.logs import MetricRow
from toolkit.server.spec import ServerSpec

_ALNUM = string.ascii_letters + string.digits


def _shaped(seed: int, kind: int) -> str:
    rng = random.Random(seed)
    body = "".join(rng.choice(_ALNUM) for _ in range(34)) + "Qz7"
    return [f"hf_{body}", f"sk-ant-{body}", f"ghp_{body}", f"github_pat_{body}", body][kind]


def _spec(flags: dict[str, str], env: dict[str, str]) -> ServerSpec:
    def words(values: dict[str, str]) -> dict[str, str]:  # no argv or environment carries a NUL (InvalidFlag)
        return {name: value.replace("\x00", "") for name, value in values.items()}

    spec = ServerSpec.vllm("m", port=8000).with_flags(words(flags)).with_env(words(env))
    return dataclasses.replace(spec, commit="abc1234")


# Each door takes (journal, text holding the secret, the bare secret) and writes it.
Door = Callable[[Journal, str, str], object]


def _in_step(action: Callable[[StepRecorder], object], **step: Any) -> Door:
    def door(journal: Journal, text: str, secret: str) -> None:
        with journal.step("flag_change", **step) as recorder:
            action(recorder)

    return door


def _metric_row(text: str) -> MetricRow:
    row = metric_rows([decode_line(80.0, 2.0, 1)])[0]
    return dataclasses.replace(row, kind=text, rank=text)


DOORS: dict[str, Door] = {
    "named flag": lambda j, t, s: j.step("flag_change", spec=_spec({"--api-key": s, "--tp": "8"}, {})).finish(),
    "named env": lambda j, t, s: j.step("nccl_env", spec=_spec({}, {"WANDB_API_KEY": s})).finish(),
    "flag value text": lambda j, t, s: j.step("flag_change", spec=_spec({"--served-model-name": t}, {})).finish(),
    "env value text": lambda j, t, s: j.step("nccl_env", spec=_spec({}, {"EXTRA_ARGS": t})).finish(),
    "title": lambda j, t, s: j.step("note", t).finish(),
    "hypothesis": lambda j, t, s: j.step("note", "h", hypothesis=t).finish(),
    "host": lambda j, t, s: j.step("note", "h", host=t).finish(),
    "note": lambda j, t, s: j.note("n", t),
    "root cause": lambda j, t, s: j.root_cause(t),
    "investigation name": lambda j, t, s: Journal(j.path, investigation=t).note("n", "x"),
    "log line": lambda j, t, s: _in_step(lambda r: r.record_log_lines([t]))(j, t, s),
    "classified log line": lambda j, t, s: _in_step(lambda r: r.record_log_lines(events(t)))(j, t, s),
    "verdict note": lambda j, t, s: _in_step(lambda r: r.set_verdict("refuted", note=t))(j, t, s),
    "run label": lambda j, t, s: _in_step(lambda r: r.record(bench_result(1.0), run_label=t))(j, t, s),
    "bench model name": lambda j, t, s: _in_step(lambda r: r.record(bench_result(1.0, model=t)))(j, t, s),
    "request error": lambda j, t, s: _in_step(lambda r: r.record(bench_result(1.0, error=t)))(j, t, s),
    "readiness": lambda j, t, s: _in_step(lambda r: r.record(readiness(t)))(j, t, s),
    "metric line": lambda j, t, s: _in_step(lambda r: r.record_metrics([_metric_row(t)]))(j, t, s),
    "versions": lambda j, t, s: _in_step(lambda r: r.set_versions({"sglang": t}))(j, t, s),
    "spec attached later": lambda j, t, s: _in_step(lambda r: r.set_spec(_spec({"--hf-token": s}, {"X": t})))(j, t, s),
    "checkout origin": lambda j, t, s: j.step("commit", "c", repo=SourceRepo("/src", f"https://{t}@git.example/x.git"))
    .finish(),
    "checkout folder": lambda j, t, s: j.step("commit", "c", repo=SourceRepo(t)).finish(),
}


def _raise_with(text: str, secret: str) -> None:
    raise CommandFailed(
        f"launch failed: {text}",
        host="gpu-a",
        command=f"HF_TOKEN={secret} sglang serve",
        exit_code=1,
        stderr=f"Traceback\n{text}\n",
    )


def _error_door(journal: Journal, text: str, secret: str) -> None:
    try:
        with journal.step("attention_mode", "boom"):
            _raise_with(text, secret)
    except CommandFailed:
        pass


DOORS["error text, traceback and evidence"] = _error_door

_PROSE = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
_SEP = st.sampled_from([" ", "\n", "=", ": ", "'", '"', ", ", "(", " | ", "\t"])


@settings(max_examples=60, deadline=None)
@given(
    door=st.sampled_from(sorted(DOORS)),
    seed=st.integers(0, 2**32),
    kind=st.integers(0, 4),
    before=_PROSE,
    after=_PROSE,
    left=_SEP,
    right=_SEP,
)
def test_a_secret_never_reaches_the_database_files(
    door: str, seed: int, kind: int, before: str, after: str, left: str, right: str
) -> None:
    secret = _shaped(seed, kind)
    text = f"{before}{left}{secret}{right}{after}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j.sqlite"
        journal = Journal(path, investigation="secrets")
        DOORS[door](journal, text, secret)
        files = [p for p in Path(tmp).iterdir() if p.name.startswith("j.sqlite")]
        needles = [secret.encode(), secret[8:30].encode()]
        for file in files:  # while open: the data sits in the -wal file
            data = file.read_bytes()
            assert not any(n in data for n in needles), f"{door}: secret found in {file.name}"
        journal.close()
        for file in Path(tmp).iterdir():  # after the checkpoint into the main file
            assert not any(n in file.read_bytes() for n in needles), f"{door}: secret found in {file.name}"


def test_a_shapeless_secret_of_a_recorded_spec_is_hidden_in_later_notes_and_lines(tmp_path: Path) -> None:
    """A value with no known shape is a secret because the spec says so (--api-key, *_PASSWORD): every
    later write of the journal hides it, in a note, an error, a log line or another step's title."""
    secret, password = "Xk9s3cr3tpass", "plainvalue77"
    spec = ServerSpec.sglang("m", tp=1).with_flags({"--api-key": secret}).with_env({"MY_DB_PASSWORD": password})
    path = tmp_path / "j.sqlite"
    journal = Journal(path)
    with journal.step("flag_change", spec=spec) as step:
        step.note(f"the server echoed api_key={secret!r} and the password {password} in its args")
        step.record_log_lines([f"[TP0] server_args=ServerArgs(api_key='{secret}')"])
        step.finish("failed", error=f"died quoting {password}")
    journal.note(f"later: {secret}", f"still {password}")
    journal.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("j.sqlite"))
    assert secret.encode() not in raw and password.encode() not in raw
    assert b"[REDACTED]" in raw


@pytest.mark.parametrize(("origin", "kept"), [
    ("https://ci-bot:glpat-abc123@gitlab.example/team/sglang.git", "https://gitlab.example/team/sglang.git"),
    ("https://fake0token0for0tests@github.com/sgl-project/sglang.git", "https://github.com/sgl-project/sglang.git"),
    ("http://user:pw@10.0.0.5:8080/x.git?private_token=abc", "http://10.0.0.5:8080/x.git"),
    ("https://a:b@c@host/x.git", "https://host/x.git"),  # the last @ ends the user part, as in git
    ("ssh://git:pw@host:2222/team/x.git", "ssh://git@host:2222/team/x.git"),  # the login stays, the password goes
    ("ssh://git@github.com/sgl-project/sglang.git", "ssh://git@github.com/sgl-project/sglang.git"),
    ("git@github.com:sgl-project/sglang.git", "git@github.com:sgl-project/sglang.git"),  # scp-like: a login
    ("https://github.com/sgl-project/sglang.git", "https://github.com/sgl-project/sglang.git"),
    ("/srv/git/sglang.git", "/srv/git/sglang.git"),
    ("file:///srv/git/sglang.git", "file:///srv/git/sglang.git"),
])
def test_a_checkout_origin_is_kept_without_its_credentials(origin: str, kept: str) -> None:
    assert clone_url(origin) == kept
    assert SourceRepo("/src/sglang", origin).origin == kept
    assert SourceRepo("/src/sglang", "  ").origin is None
