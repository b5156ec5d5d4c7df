"""Fixtures for browser tests: one JupyterLab and one Chromium per test module, a page per test.

Starting JupyterLab and Chromium takes tens of seconds on a small machine, so both live
for the module; each test gets a fresh tab, its own artifacts folder, and its kernels
shut down afterwards. Under `CI=true` a missing chromium fails the test instead of
skipping it: CI installs it (apt `chromium`), so its absence is a broken image.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from system.browser import (
    ARTIFACTS_DIR,
    REPO_ROOT,
    JupyterLab,
    LabPage,
    artifacts_dir_for,
    find_chromium,
    launch_chromium,
)

if TYPE_CHECKING:
    from playwright.sync_api import BrowserContext

_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Remember whether the test body failed, so the page fixture can screenshot it."""
    report: pytest.TestReport = yield
    if report.when == "call" and report.failed:
        item.stash[_FAILED] = True
    return report


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Debian's chromium; skipped locally when absent, a failure under CI=true."""
    path = find_chromium()
    if path is None:
        message = (
            "chromium is not installed; browser tests use Debian's (apt-get install chromium), "
            "never a downloaded browser."
        )
        if _in_ci():
            pytest.fail(message + " CI=true, so this is an error, not a skip.")
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def jupyter_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterLab]:
    """A JupyterLab on loopback whose root is a temporary folder.

    The root holds a copy of the repository's `notebooks/` (as `notebooks/`), so a test can
    open `notebooks/01_onboarding_eagle3.ipynb` without writing into the checkout, and tests
    may write their own notebooks anywhere under `jupyter_lab.root_dir`.
    """
    if not _in_ci():
        pytest.importorskip("playwright.sync_api")  # under CI a missing playwright is an error
    root = tmp_path_factory.mktemp("lab-root")
    notebooks = REPO_ROOT / "notebooks"
    if notebooks.is_dir():
        shutil.copytree(notebooks, root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    state = tmp_path_factory.mktemp("lab-state")
    log_path = ARTIFACTS_DIR / "browser" / "jupyterlab.log"
    if log_path.exists():
        log_path.unlink()
    lab = JupyterLab.start(root, state, log_path=log_path, timeout_s=120)
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture(scope="module")
def browser_context(chromium_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """Headless chromium with a fresh user-data-dir, for one test module.

    Not the session: Playwright's sync API keeps its event loop registered as running in the
    main thread while it is open, and every later `asyncio.run()` (the benchmark client's
    tests) would fail with "cannot be called from a running event loop".
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = launch_chromium(
            playwright, tmp_path_factory.mktemp("chromium-profile"), executable_path=chromium_path
        )
        context.set_default_timeout(60_000)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def lab_page(
    request: pytest.FixtureRequest, jupyter_lab: JupyterLab, browser_context: BrowserContext
) -> Iterator[LabPage]:
    """A new tab; on failure a screenshot, the DOM and the cells' state land in test-artifacts/."""
    artifacts = artifacts_dir_for(request.node.name)
    page = browser_context.new_page()
    lab_page = LabPage(page, jupyter_lab, artifacts)
    try:
        yield lab_page
    finally:
        if request.node.stash.get(_FAILED, False):
            try:
                lab_page.save_failure_evidence()
            except Exception as exc:  # a crashed page must not hide the test's own error
                (artifacts / "failure-evidence-error.txt").write_text(repr(exc))
        lab_page.save_console()
        page.close()
        jupyter_lab.shutdown_kernels()


@pytest.fixture
def lab_root(jupyter_lab: JupyterLab, request: pytest.FixtureRequest) -> Path:
    """A folder of this test's own under the server's root, for generated notebooks."""
    folder = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in request.node.name)[:80]
    path = jupyter_lab.root_dir / folder
    path.mkdir(parents=True, exist_ok=True)
    return path
