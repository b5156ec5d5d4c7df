"""Sample a host's GPUs while a run is measured: nvidia-smi over the host's one connection, or a DCGM exporter.

``nvidia-smi -lms N`` runs through :meth:`Host.open_stream` (one SSH channel for the whole run); closing the
stream ends it there. Without GPUs, ``python -m toolkit.sim telemetry`` prints the same CSV, marked simulated.

>>> with GpuTelemetry(tk.Host("gpu-a"), interval_ms=200) as gpus:   # doctest: +SKIP
...     tk.bench(server, num_prompts=64)
>>> len(gpus.samples()), gpus.note                                   # doctest: +SKIP
"""

from __future__ import annotations

import functools
import shlex
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Literal

from toolkit.errors import ToolkitError
from toolkit.observe.gpu_samples import (
    HOST_DATE_COMMAND,
    GpuSample,
    HostClock,
    dcgm_samples,
    nvidia_smi_command,
    parse_nvidia_smi_line,
)
from toolkit.observe.scrape import scrape_metrics
from toolkit.prometheus_text import parse_prometheus

if TYPE_CHECKING:
    from toolkit.host.place import Place
    from toolkit.host.streams import ByteStream

__all__ = ["GpuTelemetry", "TelemetryKind", "simulated_telemetry_command"]

TelemetryKind = Literal["nvidia-smi", "simulated", "dcgm"]
_READ_TIMEOUT_S = 0.1


def simulated_telemetry_command(python: str, server_url: str, interval_ms: int) -> str:
    """The simulator's stand-in for nvidia-smi, for the simulated server at ``server_url`` (on that host)."""
    return (f"{shlex.quote(python)} -m toolkit.sim telemetry --url {shlex.quote(server_url)} "
            f"--interval-ms {int(interval_ms)}")


class GpuTelemetry:
    """Samples GPUs from ``start()`` to ``stop()`` on its own thread; a context manager.

    ``start()`` returns once the first sample came (at most ``first_sample_timeout_s``), so the run it
    watches is covered from its start. A missing tool never raises: ``note`` says what happened.
    """

    def __init__(self, host: Place, *, kind: TelemetryKind = "nvidia-smi", interval_ms: int = 500,
                 command: str | None = None, dcgm_url: str | None = None, capacity: int = 200_000,
                 first_sample_timeout_s: float = 15.0) -> None:
        if kind == "dcgm" and not dcgm_url:
            raise ToolkitError("DCGM telemetry needs the exporter's URL",
                               hint="pass dcgm_url='http://gpu-a:9400/metrics' (dcgm-exporter's default port)")
        if kind == "simulated" and not command:
            raise ToolkitError("simulated telemetry needs its command",
                               hint="use simulated_telemetry_command(python, server_url, interval_ms)")
        self.host = host
        self.kind: TelemetryKind = kind
        self.interval_ms = int(interval_ms)
        self.command = command or (nvidia_smi_command(self.interval_ms) if kind == "nvidia-smi" else None)
        self.dcgm_url = dcgm_url
        self.note = "not started"
        self._samples: deque[GpuSample] = deque(maxlen=capacity)
        self._stream: ByteStream | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._other_lines: list[str] = []
        self._first = threading.Event()  # set by the first sample, or when the source ended without one
        self.first_sample_timeout_s = first_sample_timeout_s

    @property
    def source(self) -> str:
        """What produced the samples, as the journal and the post-mortem name it."""
        return {"nvidia-smi": "nvidia-smi", "simulated": "simulated (toolkit.sim telemetry)",
                "dcgm": f"DCGM exporter {self.dcgm_url}"}[self.kind]

    def start(self) -> GpuTelemetry:
        if self._thread is not None:
            return self
        self._stop.clear()
        if self.kind == "dcgm":
            target = self._scrape_loop
        else:
            sent = time.time()
            answer = self.host.run(HOST_DATE_COMMAND, check=False, timeout_s=10)
            clock = HostClock.measure(answer.stdout.strip(), sent, time.time()) if answer.ok else HostClock(0.0)
            assert self.command is not None
            self._stream = self.host.open_stream(self.command)
            self.note = f"{self.source} sampling every {self.interval_ms} ms"
            target = functools.partial(self._read_loop, clock)
        self._thread = threading.Thread(target=target, name=f"gpu-telemetry-{self.host.name}", daemon=True)
        self._thread.start()
        if not self._first.wait(self.first_sample_timeout_s):
            self.note = f"{self.source}: no sample within {self.first_sample_timeout_s:g} s of the start"
        return self

    def _read_loop(self, clock: HostClock) -> None:
        stream, pending = self._stream, b""
        assert stream is not None
        source = "simulated" if self.kind == "simulated" else "nvidia-smi"
        while not self._stop.is_set():
            chunk = stream.read(_READ_TIMEOUT_S)
            if chunk is None:
                continue
            if chunk == b"":
                self._first.set()
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace").strip()
                sample = parse_nvidia_smi_line(line, clock, source) if line else None
                if sample is not None:
                    with self._lock:
                        self._samples.append(sample)
                    self._first.set()
                elif line and len(self._other_lines) < 20:
                    self._other_lines.append(line)

    def _scrape_loop(self) -> None:
        assert self.dcgm_url is not None
        self.note = f"{self.source} scraped every {self.interval_ms} ms"
        while not self._stop.is_set():
            answer = scrape_metrics(self.dcgm_url, "", timeout_s=max(self.interval_ms / 1000.0, 1.0))
            if answer.status == 200:
                samples = dcgm_samples(parse_prometheus(answer.body.decode("utf-8", "replace")), time.time())
                with self._lock:
                    self._samples.extend(samples)
                self._first.set()
            elif len(self._other_lines) < 20:
                self._other_lines.append(f"GET {self.dcgm_url}: {answer.status or answer.error}")
            if len(self._other_lines) >= 3:
                self._first.set()  # the exporter does not answer: do not hold the run back
            self._stop.wait(self.interval_ms / 1000.0)

    def stop(self) -> list[GpuSample]:
        """Stop sampling (ends nvidia-smi on the host); idempotent. Returns every sample kept."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:  # the reader sees the stop within one read timeout; then the stream can go
            thread.join(timeout=_READ_TIMEOUT_S + 5)
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
        if thread is not None:
            thread.join(timeout=10)
        samples = self.samples()
        gpus = sorted({s.gpu for s in samples})
        if samples:
            self.note = f"{self.source}: {len(samples)} samples of {len(gpus)} GPU(s) every {self.interval_ms} ms"
        elif self.note != "not started":
            said = "; ".join(self._other_lines[:3]) or "no output"
            self.note = f"{self.source} gave no samples ({said})"
        return samples

    def samples(self) -> list[GpuSample]:
        with self._lock:
            return list(self._samples)

    def __enter__(self) -> GpuTelemetry:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
