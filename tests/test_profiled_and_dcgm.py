"""Real programs for the engines without a profile endpoint, and for a DCGM exporter.

- ``toolkit.observe.profiled`` runs the real CPU server (``transformers serve`` of the tiny
  model, in ``.venv-cpu``) under torch.profiler; ``tk.profile`` signals it, waits for the trace,
  fetches it and reads it (CPU only here: Python frames, no kernels). Without the CPU venv the
  test skips on a workstation and fails under ``CI=true``, as tests/test_realserver.py does.
- A DCGM exporter is a Prometheus page over HTTP: a real loopback server serves one.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sim_process import free_port

from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.moves.profile import PROFILED_WRAPPER, profile, with_profiling
from toolkit.observe.equivalence import complete_greedy
from toolkit.observe.telemetry import GpuTelemetry
from toolkit.observe.trace import load_trace
from toolkit.server.launch import launch
from toolkit.testbeds.realserver import ensure_tiny_model, tiny_server_spec

REPO = Path(__file__).resolve().parents[1]
CPU_VENV = REPO / ".venv-cpu"


def test_the_wrapper_runs_a_program_in_its_own_process_and_says_how_to_use_it(tmp_path: Path) -> None:
    script = tmp_path / "hello.py"
    script.write_text("import sys\nprint('hello from', sys.argv[1:])\nraise SystemExit(3)\n")
    done = subprocess.run([sys.executable, "-m", PROFILED_WRAPPER, "--trace-dir", str(tmp_path), "--", str(script),
                           "a", "b"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "hello from ['a', 'b']" in done.stdout
    assert "SIGUSR1 starts a profile" in done.stderr
    usage = subprocess.run([sys.executable, "-m", PROFILED_WRAPPER, "--trace-dir", str(tmp_path)],
                           capture_output=True, text=True, timeout=60)
    assert usage.returncode != 0 and "usage:" in usage.stderr


@pytest.fixture(scope="module")
def cpu_venv() -> Path:
    if not (CPU_VENV / ".installed").exists():
        reason = f"{CPU_VENV} is not installed: run `make .venv-cpu/.installed` to profile the real CPU server"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI must test the real server, but {reason}", pytrace=False)
        pytest.skip(reason)
    return CPU_VENV


@pytest.mark.timeout(400)
def test_the_real_cpu_server_under_the_profiler_gives_a_trace_through_tk_profile(
        cpu_venv: Path, tmp_path: Path) -> None:
    model = ensure_tiny_model(tmp_path / "tiny", python=cpu_venv / "bin" / "python")
    spec = tiny_server_spec(model, port=free_port(), python=str(cpu_venv / "bin" / "python"))
    spec = with_profiling(spec, str(tmp_path / "traces"))
    assert spec.launcher[1:5] == ("-m", PROFILED_WRAPPER, "--trace-dir", str(tmp_path / "traces"))
    journal = Journal(tmp_path / "j.sqlite", investigation="profiled")
    host = Host.local()
    with journal.step("note", "profile the CPU server", spec=spec) as step, \
            launch(host, spec, log_dir=str(tmp_path)) as server:
        server.wait_ready(timeout_s=300)
        with profile(server, label="cpu", journal=journal, step=step, timeout_s=240) as capture:
            answer = complete_greedy(server.url, "hello", model=spec.model, max_tokens=8, chat=True, logprobs=False)
            assert answer.status == 200, answer.body[:300]
        log = "\n".join(server.log_tail(50))
    result = capture.result
    assert result is not None and result.method == f"signal ({PROFILED_WRAPPER})"
    [trace_file] = result.files
    assert trace_file.local_name is not None and trace_file.local_name.startswith("profile-1-")
    trace = load_trace((result.directory / trace_file.local_name).read_bytes())
    frames = [e for e in trace["traceEvents"] if e.get("cat") == "python_function"]
    assert any("transformers/" in str(e.get("name")) for e in frames)
    assert result.n_kernel_calls == 0  # no GPU here: the table is empty, not wrong
    assert "profiling started" in log and "written to" in log
    assert str(journal.steps()["notes"].iloc[0]).startswith("profile: j.profiles/step-")


class _Dcgm(http.server.BaseHTTPRequestHandler):
    page = ('DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="NVIDIA H200"} 71\n'
            'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",modelName="NVIDIA H200"} 2048\n'
            'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="NVIDIA H200"} 455.5\n')

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = self.page.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def dcgm_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Dcgm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_dcgm_exporter_is_scraped_into_gpu_samples(dcgm_url: str) -> None:
    with GpuTelemetry(Host.local(), kind="dcgm", dcgm_url=dcgm_url, interval_ms=50) as gpus:
        pass
    samples = gpus.samples()
    assert samples and samples[0].gpu == "GPU0" and samples[0].util_pct == 71.0 and samples[0].power_w == 455.5
    assert samples[0].source == "dcgm" and not samples[0].simulated and "DCGM exporter" in gpus.note


def test_a_dcgm_url_that_does_not_answer_is_a_note(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    with GpuTelemetry(Host.local(), kind="dcgm", dcgm_url=url, interval_ms=20, first_sample_timeout_s=5) as gpus:
        pass
    assert gpus.samples() == [] and "gave no samples" in gpus.note
