"""Drive JupyterLab in headless Chromium: the harness behind tests/system/test_browser.py.

Why a real browser: widgets are JavaScript views of kernel-side traits. Only a browser
proves that a LogView's lines arrive while a cell still runs, that a benign line is dimmed
and that a status badge turns green. The pieces here are generic; the fixtures that own
their lifetimes are in tests/system/conftest.py.

- `JupyterLab.start(...)`: a loopback server with a random token, every Jupyter directory
  (config, data, runtime, settings, workspaces, IPython) in a temporary folder so nothing
  leaks into `~`, and `window.jupyterapp` exposed so tests run JupyterLab commands instead
  of clicking through menus.
- `launch_chromium(...)`: Debian's chromium (never a downloaded browser), headless, with a
  fresh profile and no background network traffic.
- `LabPage`: open a notebook, run all cells, wait for a DOM condition, screenshot into
  `test-artifacts/` (kept when a test fails).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim_process import free_port

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext, Locator, Page, Playwright

__all__ = [
    "ARTIFACTS_DIR",
    "CHROMIUM_ARGS",
    "REPO_ROOT",
    "JupyterLab",
    "LabPage",
    "NotebookError",
    "artifacts_dir_for",
    "find_chromium",
    "free_port",
    "launch_chromium",
    "write_notebook",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS_DIR = REPO_ROOT / "test-artifacts"

# Headless and quiet: no sandbox (CI containers run as root), no GPU, and none of the
# background requests (component updates, sync, QUIC probes) that a fresh profile makes.
CHROMIUM_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

# JupyterLab asks on first start whether to fetch news; the toast covers the screenshots.
_LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    # JupyterLab 4 renders only the cells near the viewport by default; a test that checks every
    # output (all the plots of a notebook) needs them all in the DOM.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def find_chromium() -> str | None:
    """Debian's chromium (apt package `chromium`), or None when it is not installed."""
    found = shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def artifacts_dir_for(test_name: str) -> Path:
    """`test-artifacts/browser/<test>/`, emptied at the start of the test, kept after it."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name).strip("_")[:120]
    path = ARTIFACTS_DIR / "browser" / safe
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def write_notebook(path: Path, cells: list[str], *, markdown: dict[int, str] | None = None) -> Path:
    """Write a minimal nbformat-4 notebook of code cells (markdown cells by index, optional)."""
    nb_cells: list[dict[str, Any]] = []
    for index, source in enumerate(cells):
        if markdown and index in markdown:
            nb_cells.append({"cell_type": "markdown", "metadata": {}, "source": markdown[index]})
        nb_cells.append(
            {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}
        )
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": [{**cell, "id": f"cell-{i}"} for i, cell in enumerate(nb_cells)],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1))
    return path


# -- the server -------------------------------------------------------------------------------


@dataclass
class JupyterLab:
    """A JupyterLab server on loopback, isolated in `state_dir`; `stop()` ends it."""

    root_dir: Path
    state_dir: Path
    port: int
    token: str
    process: subprocess.Popen[bytes]
    log_path: Path
    _log_file: Any = field(repr=False, default=None)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(
        cls,
        root_dir: Path,
        state_dir: Path,
        *,
        log_path: Path,
        timeout_s: float = 120.0,
        extra_args: tuple[str, ...] = (),
    ) -> JupyterLab:
        """Start `jupyter lab` from this interpreter's environment and wait for `/api/status`."""
        dirs = {
            name: state_dir / name
            for name in ("config", "data", "runtime", "settings", "workspaces", "ipython", "mpl")
        }
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        for relative, values in _LAB_SETTINGS.items():
            target = dirs["settings"] / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(values))
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(dirs["config"]),
            JUPYTER_DATA_DIR=str(dirs["data"]),
            JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
            JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
            JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
            IPYTHONDIR=str(dirs["ipython"]),
            MPLCONFIGDIR=str(dirs["mpl"]),
            JUPYTER_PLATFORM_DIRS="1",
            # Kernels import the toolkit from this checkout, whatever the notebook's folder.
            PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p),
        )
        jupyter = Path(sys.executable).with_name("jupyter")
        launcher = [str(jupyter)] if jupyter.exists() else [sys.executable, "-m", "jupyter"]
        token = secrets.token_hex(16)
        port = free_port()
        command = [
            *launcher,
            "lab",
            "--no-browser",
            "--allow-root",
            f"--ServerApp.token={token}",
            "--ServerApp.ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={root_dir}",
            "--LabApp.expose_app_in_browser=True",
            f"--LabApp.user_settings_dir={dirs['settings']}",
            f"--LabApp.workspaces_dir={dirs['workspaces']}",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            *extra_args,
        ]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = log_path.open("ab")
        log_file.write(f"$ {' '.join(command)}\n".encode())
        log_file.flush()
        process = subprocess.Popen(
            command,
            cwd=root_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # stop() signals the group: kernels go with the server
        )
        lab = cls(root_dir, state_dir, port, token, process, log_path, log_file)
        try:
            lab.wait_ready(timeout_s)
        except BaseException:
            lab.stop()
            raise
        return lab

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def api(self, method: str, path: str, *, timeout_s: float = 10.0) -> Any:
        """One REST call with the token; JSON decoded (None for an empty body)."""
        request = urllib.request.Request(
            f"{self.base_url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read()
        return json.loads(body) if body else None

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(
                    f"jupyter lab exited with status {code} before answering /api/status on port "
                    f"{self.port}; its log ({self.log_path}) ends:\n{self.log_tail()}"
                )
            try:
                self.api("GET", "/api/status", timeout_s=2.0)
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                last_error = exc
            time.sleep(0.25)
        raise TimeoutError(
            f"jupyter lab did not answer /api/status on port {self.port} within {timeout_s:.0f} s "
            f"(last error: {last_error}); a loaded machine may need a longer timeout. Log tail:\n"
            f"{self.log_tail()}"
        )

    def notebook_url(self, path: str, *, workspace: str | None = None) -> str:
        """The URL that opens `path` (relative to root_dir) in a workspace of its own.

        A fresh workspace name means JupyterLab restores no tabs from an earlier test.
        """
        workspace = workspace or f"t{secrets.token_hex(4)}"
        quoted = urllib.parse.quote(path)
        return f"{self.base_url}/lab/workspaces/{workspace}/tree/{quoted}?reset&token={self.token}"

    def shutdown_kernels(self) -> None:
        """End every session and kernel (between tests: the machine has two cores)."""
        try:
            for session in self.api("GET", "/api/sessions") or []:
                self.api("DELETE", f"/api/sessions/{session['id']}")
            for kernel in self.api("GET", "/api/kernels") or []:
                self.api("DELETE", f"/api/kernels/{kernel['id']}")
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass  # the server is going away anyway; stop() reaps the process group

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the server's process group, SIGKILL after `grace_s` (idempotent)."""
        if self.process.poll() is None:
            self.shutdown_kernels()
            try:
                os.killpg(self.process.pid, 15)
                self.process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=grace_s)
            except ProcessLookupError:
                pass
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


# -- the browser ------------------------------------------------------------------------------


def launch_chromium(
    playwright: Playwright,
    user_data_dir: Path,
    *,
    executable_path: str,
    viewport: tuple[int, int] = (1400, 1000),
) -> BrowserContext:
    """Headless Debian chromium with a fresh profile (persistent context: one user-data-dir).

    Chromium writes crash-report settings under $XDG_CONFIG_HOME and dconf under
    $XDG_CACHE_HOME whatever the profile, so its HOME and XDG folders are moved next
    to the profile: nothing lands in `~`.
    """
    user_data_dir.mkdir(parents=True, exist_ok=True)
    home = user_data_dir.with_name(user_data_dir.name + "-home")
    env: dict[str, str | float | bool] = dict(os.environ)
    for name, sub in (("HOME", ""), ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(home / sub)
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir),
        executable_path=executable_path,
        headless=True,
        args=list(CHROMIUM_ARGS),
        env=env,
        viewport={"width": viewport[0], "height": viewport[1]},
    )


class NotebookError(AssertionError):
    """A cell raised while the browser ran the notebook; carries the traceback text."""


# JavaScript run in the page. `window.jupyterapp` exists because the server was started
# with --LabApp.expose_app_in_browser (as JupyterLab's own Galata tests do).
_JS_NOTEBOOK_READY = """
async () => {
  const app = window.jupyterapp;
  if (!app) return "no-app";
  await app.restored;
  const panel = app.shell.currentWidget;
  if (!panel || !panel.sessionContext || !panel.content || !panel.content.model) return "no-notebook";
  await panel.context.ready;
  await panel.sessionContext.ready;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return kernel ? kernel.status : "no-kernel";
}
"""

_JS_PROGRESS = """
() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.model.cells;
  let pending = 0, code = 0;
  const errors = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== "code") continue;
    code += 1;
    if (cell.executionCount === null || cell.executionCount === undefined) pending += 1;
    const outputs = cell.outputs;
    for (let j = 0; j < outputs.length; j++) {
      const out = outputs.get(j).toJSON();
      if (out.output_type === "error") {
        errors.push("cell " + i + ": " + out.ename + ": " + out.evalue + "\\n" + (out.traceback || []).join("\\n"));
      }
    }
  }
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return {code, pending, errors, kernel: kernel ? kernel.status : "none"};
}
"""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class LabPage:
    """One browser tab on one notebook, with the waits a notebook test needs.

    >>> lab_page.open_notebook("probe.ipynb")                                  # doctest: +SKIP
    >>> lab_page.run_all()                                                     # doctest: +SKIP
    >>> lab_page.wait_for('.tk-status[data-state="ready"]', timeout_s=120)     # doctest: +SKIP
    >>> lab_page.wait_until_executed(timeout_s=300)                            # doctest: +SKIP
    >>> lab_page.screenshot("ready")                                           # doctest: +SKIP
    """

    def __init__(self, page: Page, lab: JupyterLab, artifacts_dir: Path) -> None:
        self.page = page
        self.lab = lab
        self.artifacts_dir = artifacts_dir
        self.console: list[str] = []
        page.on("console", lambda message: self.console.append(f"{message.type}: {message.text}"))
        page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))

    # -- navigation -------------------------------------------------------------------------
    def open_notebook(self, path: str, *, timeout_s: float = 120.0) -> None:
        """Open `path` (relative to the server's root) and wait until its kernel is idle."""
        self.page.goto(self.lab.notebook_url(path), timeout=timeout_s * 1000)
        self.page.wait_for_selector(".jp-NotebookPanel", timeout=timeout_s * 1000)
        deadline = time.monotonic() + timeout_s
        status = ""
        while time.monotonic() < deadline:
            status = self.page.evaluate(_JS_NOTEBOOK_READY)
            if status == "idle":
                return
            if status == "no-app":
                raise RuntimeError(
                    "window.jupyterapp is missing: start JupyterLab with --LabApp.expose_app_in_browser=True "
                    "(JupyterLab.start does)."
                )
            time.sleep(0.25)
        raise TimeoutError(
            f"the kernel of {path} was not idle within {timeout_s:.0f} s (last status: {status})"
        )

    def command(self, command_id: str, args: dict[str, Any] | None = None, *, wait: bool = False) -> Any:
        """Run a JupyterLab command (what the menus run), e.g. `notebook:run-all-cells`.

        Commands return promises that settle when the work is done (for run-all: when the
        last cell finished), so by default we do not await them: a test watches the page
        while cells run. `wait=True` awaits and returns the command's result.
        """
        script = (
            "([id, args]) => window.jupyterapp.commands.execute(id, args)"
            if wait
            else "([id, args]) => { window.jupyterapp.commands.execute(id, args)"
            ".catch(e => console.error('command ' + id + ' failed: ' + e)); return null; }"
        )
        return self.page.evaluate(script, [command_id, args or {}])

    def run_all(self) -> None:
        """Run > Run All Cells, through the command registry (no menu geometry involved).

        Returns once the cells are queued; use `wait_for` to watch output arrive while
        they run, and `wait_until_executed` for the end.
        """
        if self.page.evaluate("() => Boolean(window.jupyterapp)"):
            self.command("notebook:run-all-cells")
            return
        # A server started elsewhere without the exposed app: use the menu as a person would.
        self.page.get_by_role("menuitem", name="Run", exact=True).click()
        self.page.get_by_role("menuitem", name="Run All Cells", exact=True).click()

    # -- waiting ----------------------------------------------------------------------------
    def wait_for(self, selector: str, *, timeout_s: float = 60.0, state: str = "attached") -> Locator:
        """Wait for a CSS selector in the page (in any output) and return its first match."""
        locator = self.page.locator(selector).first
        locator.wait_for(state=state, timeout=timeout_s * 1000)  # type: ignore[arg-type]
        return locator

    def wait_until(
        self, predicate: Callable[[], bool], *, timeout_s: float = 60.0, what: str = "condition"
    ) -> None:
        """Poll a Python predicate (which may evaluate JavaScript) until true."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        raise TimeoutError(f"{what} did not hold within {timeout_s:.0f} s")

    def style(self, selector: str, prop: str, *, timeout_s: float = 10.0) -> str:
        """A computed style of the first match, e.g. `style('.tk-benign', 'opacity')` -> "0.5".

        Read in one JavaScript task: a widget may replace its HTML between a locator's
        lookup and a later evaluate (LogView redraws up to 10 times a second), and a
        detached element has no computed style.
        """
        script = (
            "([sel, prop]) => { const el = document.querySelector(sel);"
            " return el ? getComputedStyle(el).getPropertyValue(prop) : null; }"
        )
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.page.evaluate(script, [selector, prop])
            if value:
                return str(value)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no element matches {selector!r} (for its {prop}) after {timeout_s:.0f} s"
                )
            time.sleep(0.1)

    def attribute(self, selector: str, name: str, *, timeout_s: float = 10.0) -> str | None:
        """An attribute of the first match, read in one JavaScript task (see `style`)."""
        script = "([sel, name]) => { const el = document.querySelector(sel); return el ? [el.getAttribute(name)] : null; }"
        deadline = time.monotonic() + timeout_s
        while True:
            found = self.page.evaluate(script, [selector, name])
            if found is not None:
                return None if found[0] is None else str(found[0])
            if time.monotonic() > deadline:
                raise TimeoutError(f"no element matches {selector!r} after {timeout_s:.0f} s")
            time.sleep(0.1)

    def progress(self) -> dict[str, Any]:
        """{code, pending, errors, kernel}: the notebook model's view of the run."""
        return dict(self.page.evaluate(_JS_PROGRESS))

    def wait_until_executed(self, *, timeout_s: float = 300.0) -> dict[str, Any]:
        """Wait until every code cell has run and the kernel is idle; raise on a cell error.

        A cell error stops Run All, so failing fast with the traceback beats a timeout.
        """
        deadline = time.monotonic() + timeout_s
        state: dict[str, Any] = {}
        while time.monotonic() < deadline:
            state = self.progress()
            if state["errors"]:
                raise NotebookError(_ANSI.sub("", "\n\n".join(state["errors"])))
            if state["pending"] == 0 and state["kernel"] == "idle":
                return state
            time.sleep(0.25)
        raise TimeoutError(
            f"{state.get('pending')} of {state.get('code')} code cells had not run after {timeout_s:.0f} s "
            f"(kernel {state.get('kernel')})"
        )

    def cell_running(self) -> bool:
        """True while some cell shows the `[*]` prompt."""
        return bool(
            self.page.evaluate(
                "() => [...document.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('*'))"
            )
        )

    # -- evidence ---------------------------------------------------------------------------
    def screenshot(self, name: str, *, selector: str | None = None) -> Path:
        """Save `test-artifacts/browser/<test>/<name>.png` and return its path.

        With `selector`, only that element (scrolled into view): JupyterLab scrolls the
        notebook inside its own panel, so a full-page shot shows only the first screen.
        """
        path = self.artifacts_dir / f"{name}.png"
        if selector is None:
            self.page.screenshot(path=str(path))
        else:
            element = self.page.locator(selector).first
            element.scroll_into_view_if_needed()
            element.screenshot(path=str(path))
        return path

    def save_failure_evidence(self) -> None:
        """failure.png, dom.html and cells.json (kernel state, unrun cells, errors)."""
        self.screenshot("failure")
        (self.artifacts_dir / "dom.html").write_text(self.page.content())
        try:
            state: Any = self.progress()
        except Exception as exc:  # no notebook open (the failure came earlier)
            state = {"error": repr(exc)}
        (self.artifacts_dir / "cells.json").write_text(json.dumps(state, indent=1))

    def save_console(self) -> Path:
        path = self.artifacts_dir / "console.txt"
        path.write_text("\n".join(self.console) + "\n")
        return path
