"""A torch profile: the calls that start and stop one; a captured one's files, kernel table and Perfetto page.

Stored beside the journal with ``kernels.csv`` (a post-mortem needs no re-parse) and ``perfetto.html`` (a
button per trace that posts the file to https://ui.perfetto.dev, as Perfetto documents: it never leaves the
browser).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.observe.kernels import (
    KERNEL_COLUMNS,
    PHASE_COLUMNS,
    compare_kernel_tables,
    kernel_table,
    phase_table,
)
from toolkit.observe.trace import KernelCall, kernel_calls, load_trace, stage_of_filename, trace_marks
from toolkit.server.http import HttpAnswer, request

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["start_profile", "stop_profile", "TraceFile", "Profile", "load_profile", "compare_profiles", "PROFILE_META",
           "KERNELS_CSV", "PHASES_CSV", "PERFETTO_PAGE"]

PROFILE_META = "profile.json"
KERNELS_CSV = "kernels.csv"
PHASES_CSV = "phases.csv"
PERFETTO_PAGE = "perfetto.html"


def start_profile(url: str, path: str = "/start_profile", *, body: dict[str, object] | None = None,
                  timeout_s: float = 30.0, api_key: str | None = None) -> HttpAnswer:
    """``POST {path}`` with the engine's profiler request (SGLang ``ProfileReqInput``; vLLM 0.33 start body).

    SGLang answers 200 once every rank's profiler runs (sglang 0.5.9 entrypoints/http_server.py:832-854);
    vLLM registers the route only when profiling was configured at launch, else 404.
    """
    return request(url.rstrip("/") + path, body=body, method="POST", timeout_s=timeout_s, api_key=api_key)


def stop_profile(url: str, path: str = "/stop_profile", *, timeout_s: float = 300.0,
                 api_key: str | None = None) -> HttpAnswer:
    """``POST {path}``: the engine stops and exports its traces; this may take minutes on a big trace."""
    return request(url.rstrip("/") + path, method="POST", timeout_s=timeout_s, api_key=api_key)


@dataclass(frozen=True)
class TraceFile:
    """One trace file the engine wrote: where it is on the host, and here (None: not fetched, and why)."""

    remote_path: str
    size_bytes: int
    local_name: str | None = None
    skipped: str | None = None


@dataclass(eq=False)
class Profile:
    """A fetched profile: ``kernels()`` is the table, ``phases()`` the per-phase split, ``directory`` the files."""

    label: str
    directory: Path
    files: tuple[TraceFile, ...]
    capture_s: float  # from the start request to the traces fetched and summarised here
    method: str  # "endpoint /start_profile" or "signal (toolkit.observe.profiled)"
    engine: str
    _calls: list[KernelCall] | None = field(default=None, repr=False)
    _simulated: bool = False
    _kernels: pd.DataFrame | None = field(default=None, repr=False)
    _phases: pd.DataFrame | None = field(default=None, repr=False)

    def calls(self) -> list[KernelCall]:
        """Every kernel of every fetched trace (parsed once)."""
        if self._calls is None:
            calls: list[KernelCall] = []
            for trace_file in self.files:
                if trace_file.local_name is None:
                    continue
                trace = load_trace((self.directory / trace_file.local_name).read_bytes())
                self._simulated = self._simulated or bool(trace_marks(trace)["simulated"])
                calls += kernel_calls(trace, default_phase=stage_of_filename(trace_file.local_name))
            self._calls = calls
        return self._calls

    @property
    def simulated(self) -> bool:
        """True when the toolkit's simulator wrote the traces (they say so inside)."""
        if self._kernels is None:
            self.calls()
        return self._simulated

    def kernels(self, top: int | None = None) -> pd.DataFrame:
        """Top kernels by GPU time: phase, kernel, calls, total_ms, mean_us, share_pct, in_graph_pct, where."""
        if self._kernels is None:
            self._kernels = kernel_table(self.calls())
        return self._kernels.head(top).reset_index(drop=True) if top is not None else self._kernels.copy()

    def phases(self) -> pd.DataFrame:
        if self._phases is None:
            self._phases = phase_table(self.calls())
        return self._phases.copy()

    @property
    def gpu_ms(self) -> float:
        return float(self.kernels()["total_ms"].sum())

    @property
    def n_kernel_calls(self) -> int:
        return int(self.kernels()["calls"].sum())

    @property
    def perfetto_page(self) -> Path:
        return self.directory / PERFETTO_PAGE

    def summary(self) -> str:
        """One paragraph: what was captured and where the GPU time went."""
        fetched = [f for f in self.files if f.local_name]
        split = ", ".join(f"{r.phase} {r.share_pct:.0f}% ({r.where})" for r in self.phases().itertuples())
        skipped = [f for f in self.files if f.skipped]
        text = (f"{'SIMULATED ' if self.simulated else ''}profile {self.label!r}: {len(fetched)} trace file(s) "
                f"in {self.directory}, captured in {self.capture_s:.1f} s; {self.n_kernel_calls} kernel calls, "
                f"{self.gpu_ms:.1f} ms of GPU time: {split or 'no kernels'}.")
        if skipped:
            text += f" Not fetched: {'; '.join(f'{f.remote_path} ({f.skipped})' for f in skipped)}."
        return text

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        table = self.kernels(top=12).to_html(index=False, float_format=lambda v: f"{v:.2f}")
        link = html.escape(str(self.perfetto_page))
        return (f"<p>{html.escape(self.summary())}</p><p>Open in Perfetto: "
                f"<a href='{link}' target='_blank'>{link}</a></p>{table}")

    def write_sidecars(self) -> None:
        """``profile.json``, ``kernels.csv`` and ``perfetto.html`` beside the traces."""
        meta = {"label": self.label, "capture_s": self.capture_s, "method": self.method, "engine": self.engine,
                "simulated": self.simulated, "files": [asdict(f) for f in self.files]}
        (self.directory / PROFILE_META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        self.kernels().to_csv(self.directory / KERNELS_CSV, index=False)
        self.phases().to_csv(self.directory / PHASES_CSV, index=False)
        names = [f.local_name for f in self.files if f.local_name]
        (self.directory / PERFETTO_PAGE).write_text(perfetto_html(self.label, names), encoding="utf-8")


def load_profile(directory: str | Path) -> Profile:
    """A profile folder written by :func:`toolkit.moves.profile.profile`, read back (tables from its CSVs)."""
    folder = Path(directory)
    meta = json.loads((folder / PROFILE_META).read_text(encoding="utf-8"))
    files = tuple(TraceFile(f["remote_path"], int(f["size_bytes"]), f.get("local_name"), f.get("skipped"))
                  for f in meta["files"])
    kernels, phases = (_table(folder / name, columns, numbers) for name, columns, numbers in (
        (KERNELS_CSV, KERNEL_COLUMNS, ("calls", "total_ms", "mean_us", "share_pct", "in_graph_pct")),
        (PHASES_CSV, PHASE_COLUMNS, ("calls", "gpu_ms", "share_pct", "graph_time_pct"))))
    return Profile(meta["label"], folder, files, float(meta["capture_s"]), meta["method"], meta["engine"],
                   _simulated=bool(meta.get("simulated")), _kernels=kernels, _phases=phases)


def _table(path: Path, columns: list[str], numbers: tuple[str, ...]) -> pd.DataFrame | None:
    """A sidecar CSV, checked: a folder received with a journal may hold anything (issue 25: an odd
    ``phases.csv`` crashed the report). ValueError names the file and what is wrong with it."""
    import pandas as pd

    if not path.is_file():
        return None
    table = pd.read_csv(path, keep_default_na=False)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{path.name} lacks the column(s) {', '.join(missing)}: not a table the toolkit wrote")
    for column in numbers:
        values = pd.to_numeric(table[column], errors="coerce")
        if values.isna().any():
            raise ValueError(f"{path.name} holds a {column} that is not a number")
        table[column] = values
    return table


def compare_profiles(a: Profile, b: Profile) -> pd.DataFrame:
    """Which kernels moved from ``a`` to ``b`` (see :func:`toolkit.observe.kernels.compare_kernel_tables`)."""
    return compare_kernel_tables(a.kernels(), b.kernels(), label_a=a.label, label_b=b.label)


def slug(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9._-]+", "-", text).strip("-")[:60] or "profile"


def perfetto_html(title: str, trace_names: list[str]) -> str:
    """A page with one button per trace: fetch it (served beside the page) and post it to Perfetto's UI."""
    buttons = "\n".join(f"<li><button data-file='{html.escape(n)}'>open {html.escape(n)}</button></li>"
                        for n in trace_names)
    return f"""<!doctype html><meta charset="utf-8"><title>{html.escape(title)}: traces</title>
<h3>{html.escape(title)}</h3>
<p>Each button opens the trace in <a href="https://ui.perfetto.dev">ui.perfetto.dev</a> (the file stays in your
browser). Served from a file:// URL the browser may refuse to read it: then pick it here, or drag it onto Perfetto.</p>
<ul>{buttons}</ul><p><input type="file" id="pick"></p>
<script>
function send(buffer, name) {{
  const ui = window.open("https://ui.perfetto.dev/#!/");
  const timer = setInterval(() => ui.postMessage("PING", "https://ui.perfetto.dev"), 50);
  window.addEventListener("message", function onPong(e) {{
    if (e.data !== "PONG") return;
    clearInterval(timer); window.removeEventListener("message", onPong);
    ui.postMessage({{perfetto: {{buffer: buffer, title: name}}}}, "https://ui.perfetto.dev");
  }});
}}
document.querySelectorAll("button[data-file]").forEach(b => b.onclick = async () => {{
  const r = await fetch(b.dataset.file); send(await r.arrayBuffer(), b.dataset.file);
}});
document.getElementById("pick").onchange = async e => {{
  const f = e.target.files[0]; send(await f.arrayBuffer(), f.name);
}};
</script>
"""
