"""A secret handed to the journal through any door never reaches the bytes of the SQLite files."""

from __future__ import annotations

import random
import string
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import CommandFailed
from toolkit.journal import Journal, StepRecorder

_ALNUM = string.ascii_letters + string.digits


def _shaped(seed: int, kind: int) -> str:
    rng = random.Random(seed)
    body = "".join(rng.choice(_ALNUM) for _ in range(34)) + "Qz7"
    return [f"hf_{body}", f"sk-ant-{body}", f"ghp_{body}", f"github_pat_{body}", body][kind]


def _spec(flags: list[list[Any]], env: list[list[Any]]) -> dict[str, Any]:
    return {
        "engine": "vllm",
        "launcher": ["vllm", "serve"],
        "model": "m",
        "port": 8000,
        "flags": flags,
        "env": env,
        "workdir": None,
        "python": None,
        "commit": "abc1234",
        "label": None,
        "simulated": True,
    }


# Each door takes (journal, text holding the secret, the bare secret) and writes it.
Door = Callable[[Journal, str, str], object]


def _in_step(action: Callable[[StepRecorder], object], **step: Any) -> Door:
    def door(journal: Journal, text: str, secret: str) -> None:
        with journal.step("flag_change", **step) as recorder:
            action(recorder)

    return door


DOORS: dict[str, Door] = {
    "named flag": lambda j, t, s: j.step(
        "flag_change", spec=_spec([["--api-key", s], ["--tp", "8"]], [])
    ).finish(),
    "named env": lambda j, t, s: j.step("nccl_env", spec=_spec([], [["WANDB_API_KEY", s]])).finish(),
    "flag value text": lambda j, t, s: j.step(
        "flag_change", spec=_spec([["--served-model-name", t]], [])
    ).finish(),
    "env value text": lambda j, t, s: j.step("nccl_env", spec=_spec([], [["EXTRA_ARGS", t]])).finish(),
    "title": lambda j, t, s: j.step("note", t).finish(),
    "hypothesis": lambda j, t, s: j.step("note", "h", hypothesis=t).finish(),
    "host": lambda j, t, s: j.step("note", "h", host=t).finish(),
    "note": lambda j, t, s: j.note("n", t),
    "root cause": lambda j, t, s: j.root_cause(t),
    "log line": lambda j, t, s: _in_step(lambda r: r.record_log_lines([t]))(j, t, s),
    "verdict note": lambda j, t, s: _in_step(lambda r: r.set_verdict("refuted", note=t))(j, t, s),
    "run label": lambda j, t, s: _in_step(lambda r: r.record({"output_throughput": 1.0}, run_label=t))(
        j, t, s
    ),
    "summary": lambda j, t, s: _in_step(lambda r: r.record({"output_throughput": 1.0, "backend": t}))(
        j, t, s
    ),
    "request row": lambda j, t, s: _in_step(lambda r: r.record({"summary": {}, "requests": [{"error": t}]}))(
        j, t, s
    ),
    "readiness": lambda j, t, s: _in_step(lambda r: r.record({"ready": False, "benign": [t]}))(j, t, s),
    "metric line": lambda j, t, s: _in_step(
        lambda r: r.record_metrics(
            [{"kind": t, "values": {"HF_TOKEN": s}, "timestamp": None, "rank": None, "line_no": 1}]
        )
    )(j, t, s),
    "versions": lambda j, t, s: _in_step(lambda r: r.set_versions({"sglang": t}))(j, t, s),
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
