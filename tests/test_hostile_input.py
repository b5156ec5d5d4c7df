"""Issue 25: wrong input fails at the boundary, in one line naming the argument, in the API and the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from toolkit.cli.bench import main as bench_main
from toolkit.cli.servers import ps_main
from toolkit.errors import InvalidFlag
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.report import postmortem as report
from toolkit.server.launch import launch
from toolkit.server.spec import ServerSpec


@pytest.mark.parametrize(("call", "error", "needle"), [
    (lambda: Host("gpu-a", port=70000), ValueError, r"Host\(port=70000\): the SSH port is an integer 1-65535"),
    (lambda: Host("gpu a"), ValueError, r"Host\(hostname='gpu a'\)"),
    (lambda: ServerSpec.sglang("m", tp=0), InvalidFlag, "--tp-size 0: a parallel size is a whole number of 1 or more"),
    (lambda: ServerSpec.vllm("m", tp=-2), InvalidFlag, "--tensor-parallel-size -2: a parallel size"),
    (lambda: launch(Host.local(), "spec"), TypeError, r"launch\(host, spec='spec'\): spec is a ServerSpec"),
])
def test_the_api_names_the_wrong_argument(call: object, error: type[Exception], needle: str) -> None:
    with pytest.raises(error, match=needle) as caught:
        call()  # type: ignore[operator]
    assert "\n" not in str(caught.value)


def test_a_journal_and_a_report_name_the_wrong_argument(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"Journal\(investigation=5\): the investigation's name is text"):
        Journal(tmp_path / "j.sqlite", investigation=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"write\(journal='x.sqlite'\): pass an open Journal"):
        report.write("x.sqlite", tmp_path / "out")  # type: ignore[arg-type]


def test_ps_with_a_port_that_is_not_a_number_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert ps_main(["--host", "user@host:notaport"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --host user@host:notaport: the port 'notaport' is not a number 1-65535; write user@host "
                   "or user@host:PORT\n")


def test_bench_with_a_binary_file_as_tokenizer_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = tmp_path / "tokenizer.json"
    binary.write_bytes(bytes(range(256)) * 8)
    assert bench_main(["--url", "http://127.0.0.1:9", "--model", "m", "--tokenizer", str(binary), "--num-prompts",
                       "1", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: {binary} is not a tokenizer.json the tokenizers library can read")
    assert err.count("\n") == 1 and "; what to do: pass the tokenizer.json" in err


def test_the_simulator_refuses_a_port_out_of_range_as_argparse_does() -> None:
    done = subprocess.run([sys.executable, "-m", "toolkit.sim", "--model-path", "m", "--port", "99999"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().endswith("error: --port 99999: a TCP port is 1-65535")
