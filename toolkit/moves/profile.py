"""Capture a torch profile of a running server for a bounded window, fetch its traces, store them beside the journal.

How the seed's root cause would have been *found*: the verify step's kernels launched one by one outside
CUDA graphs. SGLang gets ``POST /start_profile`` with a fresh ``output_dir`` per capture and optionally
``num_steps`` (sglang 0.5.9 managers/scheduler_profiler_mixin.py:118-131; one
``{profile_id}-TP-{rank}.trace.json.gz`` per rank, :268-293). vLLM's folder is fixed at launch
(``VLLM_TORCH_PROFILER_DIR`` up to 0.13, ``--profiler-config`` from 0.14: :func:`with_profiling`). An engine
without endpoints runs under :mod:`toolkit.observe.profiled` (SIGUSR1 starts, SIGUSR2 writes).
The traces (at most ``max_bytes``) land in ``<journal>.profiles/step-<id>-<label>/`` with ``kernels.csv``
and ``perfetto.html``; the step gets a note ``profile: <folder>`` for the post-mortem.

>>> with tk.profile(server, label="prefill-mode verify", journal=journal, step=step) as capture:  # doctest: +SKIP
...     tk.bench(server, num_prompts=8)
>>> capture.result.kernels(top=10)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

from toolkit.engines import EngineProfile, resolve_profile
from toolkit.engines.traces import is_frontend_trace, trace_rank
from toolkit.errors import HostError, ToolkitError
from toolkit.host.shell import quote_path
from toolkit.journal import Journal, StepRecorder
from toolkit.observe import profiled
from toolkit.observe.torch_profile import Profile, TraceFile, slug, start_profile, stop_profile
from toolkit.server.http import engine_versions
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec

__all__ = ["ProfileCapture", "profile", "with_profiling", "profiles_dir", "PROFILED_WRAPPER", "DEFAULT_REMOTE_DIR"]

PROFILED_WRAPPER = profiled.__name__  # run on the host as `python -m toolkit.observe.profiled`: named by the module
DEFAULT_REMOTE_DIR = "~/.cache/toolkit/profiles"
_POLL_S = 0.5


def profiles_dir(journal: Journal) -> Path:
    """Where a journal's profiles live: ``eagle3.sqlite`` -> ``eagle3.profiles/`` beside it."""
    return journal.path.parent / f"{journal.path.stem}.profiles"


def engine_profile(server: Server) -> EngineProfile | None:
    """The running server's release profile, read from its version endpoint (None: an engine without one)."""
    if server.spec.engine not in ("sglang", "vllm"):
        return None
    versions = engine_versions(server.url, server.spec.engine)
    return resolve_profile(server.spec.engine, versions.get(server.spec.engine)).profile


def with_profiling(spec: ServerSpec, remote_dir: str = DEFAULT_REMOTE_DIR, *, version: str | None = None) -> ServerSpec:
    """``spec`` launched so that :func:`profile` can capture it, as its engine's release wants."""
    if spec.engine == "sglang":
        return spec.with_env({"SGLANG_TORCH_PROFILER_DIR": remote_dir})
    if spec.engine == "vllm":
        endpoint = resolve_profile("vllm", version).profile.start_profile
        if endpoint is not None and endpoint.enabled_by and "--profiler-config" in endpoint.enabled_by:
            return spec.with_flags({"--profiler-config": {"profiler": "torch", "torch_profiler_dir": remote_dir}})
        return spec.with_env({"VLLM_TORCH_PROFILER_DIR": remote_dir})
    if PROFILED_WRAPPER in spec.launcher:
        return spec
    python = spec.python or "python3"
    if not python.rsplit("/", 1)[-1].startswith("python"):
        python = python.rstrip("/") + "/bin/python"  # a venv directory
    launcher = (python, "-m", PROFILED_WRAPPER, "--trace-dir", remote_dir, "--", *spec.launcher)
    return ServerSpec(spec.engine, launcher, spec.model, spec.port, spec.flags, spec.env, spec.workdir, spec.python,
                      spec.commit, spec.label, spec.simulated)


def _launch_dir(spec: ServerSpec) -> str | None:
    """The trace folder fixed at launch: the wrapper's ``--trace-dir``, vLLM's config or variable."""
    launcher = list(spec.launcher)
    if PROFILED_WRAPPER in launcher and "--trace-dir" in launcher:
        return launcher[launcher.index("--trace-dir") + 1]
    config = dict(spec.flags).get("--profiler-config")
    with contextlib.suppress(ValueError, AttributeError):
        if isinstance(config, str) and (value := json.loads(config).get("torch_profiler_dir")):
            return str(value)
    env = dict(spec.env)
    return env.get("VLLM_TORCH_PROFILER_DIR") or env.get("SGLANG_TORCH_PROFILER_DIR")


class ProfileCapture:
    """A context manager: starts the server's profiler on enter; on exit stops it, fetches and stores the traces.

    ``num_steps`` (SGLang, vLLM 0.33 ``max_iterations``) bounds the window in scheduler steps, else it is
    the ``with`` block. ``ranks``: the TP ranks whose files are fetched (an 8-rank set is 8 times the bytes).
    """

    def __init__(self, server: Server, *, label: str = "profile", journal: Journal | None = None,
                 step: StepRecorder | None = None, out_dir: str | Path | None = None, num_steps: int | None = None,
                 remote_dir: str | None = None, ranks: tuple[int, ...] = (0,), max_bytes: int = 512 << 20,
                 timeout_s: float = 300.0, with_stack: bool = True, api_key: str | None = None) -> None:
        self.server, self.label, self.step = server, label, step
        base = Path(out_dir) if out_dir is not None else (profiles_dir(journal) if journal else Path("profiles"))
        tag = f"step-{step.id}-{slug(label)}" if step is not None else f"{slug(label)}-{time.strftime('%Y%m%d-%H%M%S')}"
        self.local_dir = base / tag
        self.journal_dir = journal.path.parent if journal is not None else None
        self.num_steps, self.ranks, self.max_bytes, self.timeout_s = num_steps, ranks, max_bytes, timeout_s
        self.with_stack, self.api_key = with_stack, api_key
        self.engine = engine_profile(server)
        self.method = "signal" if self.engine is None else "endpoint"
        fixed = _launch_dir(server.spec)
        if self.method == "signal" and PROFILED_WRAPPER not in server.spec.launcher:
            raise ToolkitError(f"{server.spec.engine} has no profiler endpoint and {server.where} was not launched "
                               "under the profiler", hint="launch with_profiling(spec) (toolkit.moves.profile)")
        if server.spec.engine == "vllm" and fixed is None:
            raise ToolkitError(f"vLLM writes traces only to a folder set at launch; {server.where} has none",
                               hint="launch with_profiling(spec, '/some/dir', version=...) (toolkit.moves.profile)")
        if server.spec.engine == "sglang":  # a fresh folder per capture: no earlier trace is taken for this one
            root = remote_dir or fixed or DEFAULT_REMOTE_DIR
            self.remote_dir = server.host.expand_user(f"{root.rstrip('/')}/{uuid.uuid4().hex[:12]}")
        else:
            self.remote_dir = server.host.expand_user(str(fixed))
        self.result: Profile | None = None
        self._before: dict[str, int] = {}  # trace file name -> size, before the start
        self._started_at = 0.0
        self._deadline = math.inf  # the stop, the wait and the fetch all end by it (timeout_s after the stop)

    def _list(self) -> dict[str, int]:
        return parse_trace_listing(self.server.host.run(trace_listing_script(self.remote_dir), timeout_s=30).stdout)

    def _signal(self, name: str) -> None:
        self.server.host.run(f"kill -{name} {int(self.server.pid)}", timeout_s=10)

    def _wanted(self, names: list[str]) -> list[str]:
        """The wanted ranks' files, named as the engine release writes them (``toolkit.engines.traces``:
        vLLM 0.25 ``rank{r}.<ns>``, later ``..._tp{r}_...``, SGLang ``-TP-{r}``), then vLLM's front-end
        CPU trace (``<host>_<pid>.async_llm.<ns>``); every file for an engine without endpoints."""
        engine = self.server.spec.engine
        if engine not in ("sglang", "vllm"):
            return sorted(names)
        version = self.server.release().version
        ranked = sorted(n for n in names if trace_rank(engine, version, n) in self.ranks)
        return ranked + sorted(n for n in names if is_frontend_trace(engine, version, n))

    def __enter__(self) -> ProfileCapture:
        self.server.host.run(f"mkdir -p {quote_path(self.remote_dir)}", timeout_s=30)
        self._before = self._list()
        self._started_at = time.time()
        if self.method == "signal":
            self._signal("USR1")
            return self
        assert self.engine is not None and self.engine.start_profile is not None
        fields = self.engine.start_profile.body_fields
        body: dict[str, Any] = {}
        if "output_dir" in fields:
            body.update(output_dir=self.remote_dir, activities=["CPU", "GPU"], with_stack=self.with_stack,
                        record_shapes=False)
            if self.num_steps:
                body["num_steps"] = int(self.num_steps)
        elif self.num_steps and "max_iterations" in fields:
            body["max_iterations"] = int(self.num_steps)
        answer = start_profile(self.server.url, self.engine.start_profile.path, body=body or None,
                               api_key=self.api_key)
        if answer.status != 200:
            said = answer.body.decode("utf-8", "replace")[:300] or answer.error or ""
            hint = (f"the route needs {self.engine.start_profile.enabled_by} at launch: use with_profiling(spec)"
                    if answer.status == 404 and self.engine.start_profile.enabled_by else
                    "read the server log: the engine says why it refused")
            raise ToolkitError(f"{self.server.where} refused to start profiling (HTTP {answer.status})",
                               evidence=[said], hint=hint)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            names = self._stop_and_wait()
        except BaseException:
            if exc is None:
                raise
            return  # the block's own error matters more than a profile it interrupted
        if exc is None:
            self._fetch(names)

    def _stop_and_wait(self) -> list[str]:
        deadline = self._deadline = time.monotonic() + self.timeout_s
        stopped = None
        if self.method == "signal":
            self._signal("USR2")
        else:
            assert self.engine is not None and self.engine.start_profile is not None
            if self.num_steps and "output_dir" in self.engine.start_profile.body_fields:  # SGLang: by itself
                grace = time.monotonic() + min(30.0, self.timeout_s / 2)
                while time.monotonic() < grace and not self._ready(self._new_files()):
                    time.sleep(_POLL_S)
            if not self._ready(self._new_files()):
                assert self.engine.stop_profile is not None
                stopped = stop_profile(self.server.url, self.engine.stop_profile.path, timeout_s=self.timeout_s,
                                       api_key=self.api_key)
        previous: dict[str, int] | None = None
        while time.monotonic() < deadline:
            current = self._new_files()
            wanted = self._ready(current)
            if wanted and previous is not None and all(previous.get(n) == current[n] for n in wanted):
                return wanted  # sizes held still for one poll: the engine finished writing
            previous = current
            time.sleep(_POLL_S)
        said = [] if stopped is None else [f"POST /stop_profile: HTTP {stopped.status} "
                                           f"{stopped.body.decode('utf-8', 'replace')[:200]}"]
        raise ToolkitError(f"no complete trace appeared in {self.remote_dir} on {self.server.host.name} within "
                           f"{self.timeout_s:g} s", evidence=said + self.server.log_tail(8),
                           hint="read the server log (did the profiler start? is the folder writable?), "
                                "or raise timeout_s for a large trace")

    def _new_files(self) -> dict[str, int]:
        return {n: s for n, s in self._list().items() if self._before.get(n) != s}

    def _ready(self, files: dict[str, int]) -> list[str]:
        """The wanted files when all are there and non-empty (SGLang: one per wanted TP rank), else []."""
        wanted = self._wanted(list(files))
        if not wanted or any(files[n] == 0 for n in wanted):
            return []
        engine, version = self.server.spec.engine, self.server.release().version
        ranked = [n for n in wanted if trace_rank(engine, version, n) is not None]
        if engine in ("sglang", "vllm") and len(ranked) < len(self.ranks):
            return []  # every rank writes its own file: wait for all the wanted ones
        return wanted

    def _fetch(self, names: list[str]) -> None:
        self.local_dir.mkdir(parents=True, exist_ok=True)
        sizes, budget, files = self._new_files(), self.max_bytes, []
        for name in names:
            remote, size = f"{self.remote_dir}/{name}", sizes.get(name, 0)
            if size > budget:
                files.append(TraceFile(remote, size, None, f"{size / 2**20:.0f} MiB is over the {budget / 2**20:.0f}"
                                                           " MiB left of max_bytes; it stays on the host"))
                continue
            try:
                data = self.server.host.read_file(remote, max_bytes=budget,
                                                  timeout_s=max(self._deadline - time.monotonic(), 0.5))
            except HostError as exc:  # grew past the budget, became a FIFO, or hung: it stays on the host
                files.append(TraceFile(remote, size, None, f"not fetched: {exc.message}"))
                continue
            (self.local_dir / name).write_bytes(data)
            budget -= len(data)
            files.append(TraceFile(remote, len(data), name))
        method = (f"endpoint {self.engine.start_profile.path}" if self.engine and self.engine.start_profile
                  else f"signal ({PROFILED_WRAPPER})")
        result = Profile(self.label, self.local_dir, tuple(files), 0.0, method, self.server.spec.engine)
        result.kernels()  # parsed once here: the capture time includes the summary
        result.capture_s = time.time() - self._started_at
        result.write_sidecars()
        self.result = result
        if self.step is not None:
            where = (self.local_dir.relative_to(self.journal_dir) if self.journal_dir is not None
                     and self.local_dir.is_relative_to(self.journal_dir) else self.local_dir)
            self.step.note(f"profile: {where.as_posix()}\n{result.summary()}")


def trace_listing_script(folder: str) -> str:
    """The trace files in ``folder`` as ``SIZE<TAB>NAME<NUL>`` entries: regular files only (no FIFO, no
    link), NUL-separated because a file name may hold a newline (issue 25: ``x\\n99\\tfifo.json``
    forged a listing line)."""
    return (f"find {quote_path(folder)} -maxdepth 1 -type f \\( -name '*.json' -o -name '*.json.gz' \\) "
            "! -name '.*' -printf '%s\\t%f\\0' 2>/dev/null; true")


def parse_trace_listing(text: str) -> dict[str, int]:
    """``{name: size}`` from :func:`trace_listing_script`'s output."""
    files = {}
    for entry in text.split("\0"):
        size, tab, name = entry.partition("\t")
        if tab and name and size.isdigit():
            files[name] = int(size)
    return files


def profile(server: Server, **options: Any) -> ProfileCapture:
    """Profile ``server`` for the ``with`` block (options: :class:`ProfileCapture`): ``capture.result``."""
    return ProfileCapture(server, **options)
