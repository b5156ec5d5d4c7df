#!/usr/bin/env python3
"""Regenerate the engines' flag contracts from their released wheels.

For each release: ``pip download --no-deps`` the wheel into a cache folder, extract its
Python files, run the release's own argument parser with torch and the GPU stack
stubbed (``scripts/_engine_stubs.py``, in a small venv of light dependencies built in
the cache), and write

- ``tests/data/help/<engine>-<version>.txt``: the help as the engine prints it at 80
  columns (``python -m sglang.launch_server --help``; ``vllm serve --help``, plus
  ``-all.txt`` with ``--help=all`` where vLLM groups its help), for the releases in
  :data:`HELP_FILE_RELEASES` or named with ``--version``;
- ``toolkit/engines/flags/<engine>-<version>.txt``: one flag per line
  (``NAME<TAB>value|switch<TAB>ALIASES``), parsed by ``toolkit.server.help_table.parse_help``.

Both name the release and the wheel in a first comment line. A new release is one
command away::

    python scripts/engine_contracts.py --engine sglang --version 0.5.24
    python scripts/engine_contracts.py --all            # every release in RELEASES

Nothing downloaded is written into the repository: wheels and extracted code stay in
``--cache-dir`` (default ``$XDG_CACHE_HOME/toolkit/engine-contracts``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from toolkit.engines import PEER_NAMES, PROFILES, RELEASE_HINTS, EngineProfile, ReleaseRange, parse_version
from toolkit.server.help_table import FlagTable, parse_help

REPO = Path(__file__).resolve().parents[1]
STUBS = Path(__file__).resolve().with_name("_engine_stubs.py")

# The releases read for toolkit/engines (see docs/engine-releases.md); --all regenerates these.
RELEASES: dict[str, tuple[str, ...]] = {
    "sglang": ("0.4.0", "0.4.10", "0.5.1", "0.5.4.post1", "0.5.4.post2", "0.5.9", "0.5.14", "0.5.16", "0.5.17",
               "0.5.19", "0.5.20", "0.5.23"),
    "vllm": ("0.6.0", "0.6.6", "0.7.3", "0.8.2", "0.8.5", "0.9.0", "0.9.2", "0.10.1.1", "0.10.2", "0.11.0",
             "0.12.0", "0.14.0", "0.16.0", "0.20.0", "0.25.0", "0.30.0", "0.33.0"),
}
# Full help text is large (up to 160 kB): kept for one release per profile line.
HELP_FILE_RELEASES: dict[str, frozenset[str]] = {
    "sglang": frozenset({"0.4.10", "0.5.4.post1", "0.5.19", "0.5.20", "0.5.23"}),
    "vllm": frozenset({"0.6.6", "0.8.5", "0.10.2", "0.12.0", "0.33.0"}),
}
# What the argparse definitions import at module level and cannot be stubbed (pydantic models,
# msgspec structs, regexes that must match): small pure-Python or wheel-only packages.
LIGHT_DEPENDENCIES = ("pydantic", "msgspec", "numpy", "regex", "packaging", "typing_extensions", "dill",
                      "cloudpickle", "pyyaml", "cachetools", "py-cpuinfo")
_MISSING = re.compile(r"No module named '([A-Za-z0-9_]+)")
_MAX_AUTO_STUBS = 25


class ContractError(RuntimeError):
    """A release could not be downloaded or its parser could not be run."""


@dataclass(frozen=True)
class Capture:
    """One release's help, as printed, and the wheel it came from."""

    engine: str
    version: str
    wheel: str
    help_text: str  # the full flag list (vLLM: --help=all)
    short_help: str | None  # vLLM >= 0.11 prints config groups unless asked for --help=all
    command: str
    auto_stubbed: tuple[str, ...]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "toolkit" / "engine-contracts"


def download_wheel(engine: str, version: str, cache: Path) -> Path:
    """The release's wheel, downloaded once with ``pip download --no-deps``."""
    folder = cache / "wheels" / f"{engine}-{version}"
    wheels = sorted(folder.glob("*.whl"))
    if not wheels:
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
               f"{engine}=={version}", "-d", str(folder)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(folder.glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise ContractError(
                f"pip could not download {engine}=={version}: {done.stderr.strip()[-600:]}\n"
                f"check the release exists (`pip index versions {engine}`) and that PyPI is reachable"
            )
    return wheels[0]


def extract(wheel: Path, cache: Path) -> Path:
    """The wheel's files without compiled objects (never imported: stubbed instead)."""
    dest = cache / "src" / wheel.stem
    marker = dest / ".extracted"
    if not marker.exists():
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if not re.search(r"\.(so(\.\d+)*|cubin|fatbin|a)$", m)]
            archive.extractall(dest, members)
        marker.write_text(wheel.name)
    return dest


def capture_python(cache: Path, base_python: str) -> Path:
    """A venv with :data:`LIGHT_DEPENDENCIES` only, built once in the cache."""
    root = cache / "venv"
    python = root / "bin" / "python"
    marker = root / ".ready"
    if not marker.exists():
        if base_python == sys.executable:
            venv.EnvBuilder(with_pip=True, clear=True).create(root)
        else:
            subprocess.run([base_python, "-m", "venv", "--clear", str(root)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *LIGHT_DEPENDENCIES],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise ContractError(f"could not install {' '.join(LIGHT_DEPENDENCIES)} into {root}: "
                                f"{done.stderr.strip()[-600:]}")
        marker.write_text("ok")
    return python


def run_parser(python: Path, engine: str, src: Path, args: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """Run the release's parser with ``args``; stub any further missing module and retry."""
    extra: list[str] = []
    env = {**os.environ, "PYTHONHASHSEED": "0", "COLUMNS": "80", "VLLM_TARGET_DEVICE": "cpu",
           "TRANSFORMERS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    for _ in range(_MAX_AUTO_STUBS):
        cmd = [str(python), str(STUBS), "--engine", engine, "--src", str(src)]
        cmd += [f"--stub={name}" for name in extra] + ["--", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=src)
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout, tuple(extra)
        missing = _MISSING.findall(done.stderr)
        if missing and missing[-1] != engine and missing[-1] not in extra:
            extra.append(missing[-1])
            continue
        raise ContractError(f"{engine} {src.name}: `{engine} {' '.join(args)}` failed (exit {done.returncode}):\n"
                            f"{done.stderr.strip()[-1500:]}")
    raise ContractError(f"{engine} {src.name}: more than {_MAX_AUTO_STUBS} missing modules; add them to HEAVY")


def capture(engine: str, version: str, cache: Path, base_python: str) -> Capture:
    wheel = download_wheel(engine, version, cache)
    src = extract(wheel, cache)
    python = capture_python(cache, base_python)
    if engine == "sglang":
        text, stubbed = run_parser(python, engine, src, ["--help"])
        return Capture(engine, version, wheel.name, text, None, "python -m sglang.launch_server --help", stubbed)
    text, stubbed = run_parser(python, engine, src, ["serve", "--help"])
    if "--help=all" not in text:
        return Capture(engine, version, wheel.name, text, None, "vllm serve --help", stubbed)
    full, more = run_parser(python, engine, src, ["serve", "--help=all"])
    return Capture(engine, version, wheel.name, full, text, "vllm serve --help=all", stubbed + more)


def header(cap: Capture, what: str) -> str:
    return (f"# {cap.engine} {cap.version}: {what} of the PyPI wheel {cap.wheel}, read by "
            f"scripts/engine_contracts.py (heavy dependencies stubbed, 80 columns)\n")


def flag_lines(table: FlagTable) -> list[str]:
    return [f"{spec.name}\t{'value' if spec.takes_value else 'switch'}\t{' '.join(spec.aliases)}".rstrip()
            for spec in table]


def write_outputs(cap: Capture, help_dir: Path, flags_dir: Path, write_help: bool) -> list[Path]:
    """Write the help file(s) and the flag list; return the paths written."""
    table = parse_help(cap.help_text, engine=cap.engine, version=cap.version, source=cap.command)
    written: list[Path] = []
    flags_path = flags_dir / f"{cap.engine}-{cap.version}.txt"
    flags_path.parent.mkdir(parents=True, exist_ok=True)
    flags_path.write_text(header(cap, f"`{cap.command}`") + f"# {len(table)} flags: name, value|switch, aliases\n"
                          + "\n".join(flag_lines(table)) + "\n", encoding="utf-8")
    written.append(flags_path)
    if write_help:
        help_dir.mkdir(parents=True, exist_ok=True)
        if cap.short_help is None:
            path = help_dir / f"{cap.engine}-{cap.version}.txt"
            path.write_text(header(cap, f"`{cap.command}`") + cap.help_text, encoding="utf-8")
            written.append(path)
        else:
            full = help_dir / f"{cap.engine}-{cap.version}-all.txt"
            full.write_text(header(cap, f"`{cap.command}`") + cap.help_text, encoding="utf-8")
            short = help_dir / f"{cap.engine}-{cap.version}.txt"
            short.write_text(header(cap, "`vllm serve --help`") + cap.short_help, encoding="utf-8")
            written += [full, short]
    return written


_HELP_NAME = re.compile(r"^(?P<engine>sglang|vllm)-(?P<version>\d[\w.+]*?)(?P<all>-all)?\.txt$")


def check(help_dir: Path, flags_dir: Path) -> list[str]:
    """Offline: every flag list agrees with the help capture of the same release, where both exist."""
    problems: list[str] = []
    captures = {}
    for path in sorted(help_dir.glob("*.txt")):
        match = _HELP_NAME.match(path.name)
        if match is None:
            continue
        key = (match["engine"], match["version"])
        if match["all"] or key not in captures:  # vLLM: the --help=all capture holds the flags
            captures[key] = path
    for (engine, version), path in sorted(captures.items()):
        flags_path = flags_dir / f"{engine}-{version}.txt"
        if not flags_path.exists():
            problems.append(f"{path.name}: no {flags_path.name}")
            continue
        try:
            table = parse_help(path.read_text(encoding="utf-8"), engine=engine, version=version)
        except ValueError as exc:
            problems.append(f"{path.name}: {exc}")
            continue
        listed = [line for line in flags_path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
        if listed != flag_lines(table):
            problems.append(f"{flags_path.name} differs from the flags parsed from {path.name}: regenerate it")
    return problems


_DOCS_MARKER = "## Every belief\n"
_DOCS_INTRO = ("\nGenerated from `toolkit/engines` by `python scripts/engine_contracts.py --docs` (a test checks that every\n"
               "source line of the data appears here).\n")
_WHEN = {"always": "always (overwrites the user's value)", "if_unset": "only when unset"}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|")


def _profile_rows(p: EngineProfile) -> list[tuple[str, str]]:
    rows = [(f"workers start by `{p.start_method}`", p.start_method_source)]
    for w in p.env_writes:
        when = _WHEN.get(w.when, f"with `{w.flag}`")
        extra = f"; {w.condition}" if w.condition else ""
        within = f" [{w.releases}]" if w.releases else ""
        seen = ", ".join(w.visible_in) or "no process"
        rows.append((f"`{w.name}={w.value}` in the {w.process} process, {when}{extra}{within}; "
                     f"/proc environ shows it in: {seen}", w.source))
    for h in p.health:
        rows.append((f"`{h.method} {h.path}`: proves generation {h.proves_generation}, takes >= {h.min_latency_s:g} s, "
                     f"unhealthy -> {h.unhealthy_status} ({'; '.join(h.unhealthy_when)}), body {h.body}", h.source))
        rows += [(f"`{h.path}` answers {a.status}: {a.meaning}, body {a.body}"
                  + (f" (reason in `{a.reason_field}`)" if a.reason_field else ""), a.source) for a in h.answers]
    rows.append((f"ready line `{p.ready_log_line}`", p.ready_log_source))
    m = p.metrics
    if m is not None:
        spec = ", ".join(x for x in (m.spec_accepted_tokens, m.spec_draft_tokens, m.spec_drafts, m.spec_accept_length)
                         if x)
        served = f" needs `{m.enabled_by}`" if m.enabled_by else " always served"
        rows.append((f"`{p.metrics_path}`{served}: `{m.running}`, `{m.waiting}`, `{m.kv_cache_usage}`; spec: {spec}",
                     m.source))
    for e in (p.flush_cache, p.start_profile, p.stop_profile):
        if e is None:
            continue
        parts = [f"`{'/'.join(e.methods)} {e.path}`"]
        parts += [f"needs {e.enabled_by}"] if e.enabled_by else []
        parts += ["body: " + ", ".join(e.body_fields)] if e.body_fields else []
        parts += ["query: " + ", ".join(e.query_fields)] if e.query_fields else []
        parts += [f"output dir: ${e.output_env}"] if e.output_env else []
        parts += [e.note] if e.note else []
        rows.append(("; ".join(parts), e.source))
    env = f" or `{p.api_key_env}`" if p.api_key_env else " (no env variable)"
    open_ = f"; open: {', '.join(p.api_key_open)}" if p.api_key_open else ""
    if p.api_key_flag is None:
        rows.append(("no API key: every route is open", p.api_key_source))
    else:
        rows.append((f"`{p.api_key_flag}`{env} guards {', '.join(p.api_key_guarded)}{open_}", p.api_key_source))
    rows.append((f"version: `{p.version_command}`", p.version_source))
    rows.append((f"flags captured from: {', '.join(p.flag_releases)}", "toolkit/engines/flags/ (scripts/engine_contracts.py)"))
    rows += [("note: " + note, "(in the note)") for note in p.notes]
    rows += [(f"hint `{h.family}` [{h.releases}]: {h.text}", h.source) for h in RELEASE_HINTS
             if h.engine == p.engine and _overlaps(h.releases, p.releases)]
    return rows


def _overlaps(a: ReleaseRange, b: ReleaseRange) -> bool:
    below = a.high is not None and b.low is not None and parse_version(a.high) <= parse_version(b.low)
    above = b.high is not None and a.low is not None and parse_version(b.high) <= parse_version(a.low)
    return not (below or above)


def beliefs_markdown() -> str:
    """The "Every belief" section of docs/engine-releases.md, from toolkit.engines."""
    out: list[str] = []
    for engine, lines in PROFILES.items():
        out += ["", f"### {engine}", "", "| line | belief | source |", "|---|---|---|"]
        out += [f"| {p.name} | {_cell(fact)} | {_cell(src)} |" for p in lines for fact, src in _profile_rows(p)]
    out += ["", "### Benchmark names", "",
            "| tool | backends | printed | JSON key | toolkit key | when | definition | source |",
            "|---|---|---|---|---|---|---|---|"]
    for n in PEER_NAMES:
        when = {None: "always", True: "speculative decoding", False: "no speculative decoding"}[n.speculative]
        out.append(f"| {n.tool} | {', '.join(n.backends)} | `{n.printed}` | `{n.json_key}` | `{n.toolkit_key}` | {when} "
                   f"| {_cell(n.definition)} | {_cell(n.source)} |")
    return "\n".join(out) + "\n"


def write_docs(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    head = text.split(_DOCS_MARKER, 1)[0]
    path.write_text(head + _DOCS_MARKER + _DOCS_INTRO + beliefs_markdown(), encoding="utf-8")


def _targets(ns: argparse.Namespace) -> Iterable[tuple[str, str, bool]]:
    if ns.all:
        engines = [ns.engine] if ns.engine else list(RELEASES)
        for engine in engines:
            for version in RELEASES[engine]:
                yield engine, version, version in HELP_FILE_RELEASES[engine]
    else:
        for version in ns.version:
            yield ns.engine, version, not ns.no_help_file


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--engine", choices=sorted(RELEASES))
    parser.add_argument("--version", action="append", default=[], help="a release, e.g. 0.5.23 (repeatable)")
    parser.add_argument("--all", action="store_true", help="every release in RELEASES")
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                        help="wheels, extracted files and the capture venv (default: %(default)s)")
    parser.add_argument("--python", default=sys.executable, help="the Python the capture venv is built from")
    parser.add_argument("--help-dir", type=Path, default=REPO / "tests" / "data" / "help")
    parser.add_argument("--flags-dir", type=Path, default=REPO / "toolkit" / "engines" / "flags")
    parser.add_argument("--no-help-file", action="store_true", help="write only the flag list")
    parser.add_argument("--docs", action="store_true",
                        help="rewrite the 'Every belief' table of docs/engine-releases.md from toolkit.engines")
    parser.add_argument("--check", action="store_true",
                        help="offline: check that the flag lists match the help captures, write nothing")
    ns = parser.parse_args(argv)
    if ns.docs:
        write_docs(REPO / "docs" / "engine-releases.md")
        return 0
    if ns.check:
        problems = check(ns.help_dir, ns.flags_dir)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    if not ns.all and not (ns.engine and ns.version):
        parser.error("name --engine and --version, or pass --all")
    failures: list[str] = []
    targets = list(_targets(ns))
    for engine, version, write_help in tqdm(targets, desc="releases", unit="release"):
        try:
            cap = capture(engine, version, ns.cache_dir, ns.python)
            paths = write_outputs(cap, ns.help_dir, ns.flags_dir, write_help)
        except (ContractError, ValueError) as exc:
            failures.append(f"{engine} {version}: {exc}")
            continue
        note = f" (also stubbed: {', '.join(sorted(set(cap.auto_stubbed)))})" if cap.auto_stubbed else ""
        tqdm.write(f"{engine} {version}: " + ", ".join(str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(p)
                                                       for p in paths) + note)
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
