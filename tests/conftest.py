"""Shared fixtures: a real loopback sshd and the hosts that reach it; a loopback Slurm cluster; podman.

``ssh_host`` / ``ssh_hosts`` / ``local_host`` / ``any_host`` are the hosts every test module
may use; ``any_host`` runs a test once on ``Host.local()`` and once over SSH. The sshd starts
once per session, and only if a test asks for it; so do ``slurm`` and ``podman``.

Under ``CI=true`` a missing sshd fails the run: a skipped SSH suite looks green and tests
nothing. Elsewhere it skips with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from system.containers import LocalPodman, find_podman, make_rootfs, probe
from system.slurm import LoopbackSlurm, missing_parts
from system.sshd import ADDRESSES, LoopbackSshd, find_sshd
from tiers import REAL_FILES, TIMING_FILES

from toolkit.host.host import Host


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSshd]:
    """A real ``sshd`` on 127.0.0.1-3 at a free port, with generated host and client keys."""
    path = find_sshd()
    if path is None:
        reason = "sshd is not installed (Debian/Ubuntu: apt-get install openssh-server openssh-client)"
        if _in_ci():
            pytest.fail(f"CI=true but {reason}; the SSH tests must run in CI", pytrace=False)
        pytest.skip(reason)
    server = LoopbackSshd.start(tmp_path_factory.mktemp("sshd"), path)
    yield server
    server.stop()


MakeSshHost = Callable[..., Host]


@pytest.fixture(scope="session")
def make_ssh_host(sshd: LoopbackSshd) -> Iterator[MakeSshHost]:
    """Factory for fresh SSH hosts to the loopback sshd: ``make_ssh_host("127.0.0.2", known_hosts=...)``.

    Defaults: the test user, the generated client key, the sshd's known_hosts and an empty
    ssh_config (so a developer's ~/.ssh/config cannot change the outcome). Closed at the end.
    """
    made: list[Host] = []

    def make(address: str = ADDRESSES[0], **overrides: Any) -> Host:
        options: dict[str, Any] = {
            "user": sshd.user,
            "port": sshd.port,
            "key_filename": str(sshd.client_key),
            "known_hosts": str(sshd.known_hosts),
            "ssh_config": str(sshd.ssh_config),
            "connect_timeout_s": 5.0,
        }
        options.update(overrides)
        host = Host(address, **options)
        made.append(host)
        return host

    yield make
    for host in made:
        host.close()


@pytest.fixture(scope="session")
def ssh_host(make_ssh_host: MakeSshHost) -> Host:
    """An SSH Host to 127.0.0.1 through the loopback sshd (host key checked)."""
    return make_ssh_host(ADDRESSES[0])


@pytest.fixture(scope="session")
def ssh_hosts(make_ssh_host: MakeSshHost) -> list[Host]:
    """Three SSH hosts, 127.0.0.1, .2 and .3: distinct addresses of one loopback sshd."""
    return [make_ssh_host(address) for address in ADDRESSES]


@pytest.fixture(scope="session")
def local_host() -> Host:
    return Host.local()


@pytest.fixture(scope="session", params=["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def any_host(request: pytest.FixtureRequest) -> Host:
    """Each test that takes it runs on Host.local() and on the SSH host: one API, same results."""
    if request.param == "local":
        return Host.local()
    host: Host = request.getfixturevalue("ssh_host")
    return host


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackSlurm]:
    """A real two-node Slurm cluster on loopback (munged, slurmctld, two slurmd), in a temp folder.

    Under ``CI=true`` missing Slurm fails the run (``.ci/run`` installs slurm-wlm and munge):
    a skipped Slurm suite looks green and tests nothing. Elsewhere it skips with the reason.
    """
    why = missing_parts()
    if why is not None:
        if _in_ci():
            pytest.fail(f"CI=true but {why}; the Slurm tests must run in CI", pytrace=False)
        pytest.skip(why)
    cluster = LoopbackSlurm.start(tmp_path_factory.mktemp("slurm"))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPodman]:
    """Debian's podman with a root filesystem made here (no image is pulled); see tests/system/containers.py.

    Under ``CI=true`` a missing podman fails the run (``.ci/run`` installs it). A podman that
    is installed but cannot run a container on this machine skips, with podman's own words.
    """
    if find_podman() is None:
        reason = "podman is not installed (Debian: apt-get install podman runc catatonit)"
        if _in_ci():
            pytest.fail(f"CI=true but {reason}; the container tests must run in CI", pytrace=False)
        pytest.skip(reason)
    if os.geteuid() != 0:
        pytest.skip("the container tests run rootful podman: run them as root")
    engine = LocalPodman(make_rootfs(tmp_path_factory.mktemp("podman")))
    why = probe(engine)
    if why is not None:
        pytest.skip(why)
    yield engine
    engine.cleanup()


# -- tiers and parallel runs -------------------------------------------------------------------------------
# `make check` runs the edit loop's tier (`-m "not real"`): the pure core and fast integration. `make test`
# runs every test but the speed-measuring ones (`timing`, tests/tiers.py) in parallel through pytest-xdist with
# `--dist loadgroup` (xdist keeps a group on one worker), and those beside them at real-time priority
# (scripts/test_tiers.sh). The session fixtures that are costly or
# share machine-wide state (the Slurm cluster's munged, rootful podman, JupyterLab in Chromium) are one group each,
# so they start once per run; the tests of a file that shares a module fixture (a simulator, a notebook run) stay
# on one worker, so it starts once. The loopback sshd may start once per worker: each one binds its own free port
# with its own keys and known_hosts.
_SHARED_PARTS = {"slurm": "slurm", "podman": "podman", "chromium_path": "browser", "jupyter_lab": "browser"}
_SHARED_MARKERS = {"slurm": "slurm", "container": "podman", "browser": "browser"}
REAL_MARKERS = ("ssh", "browser", "slow", "realserver", "slurm", "container", "peers")


def _group(item: pytest.Item) -> str | None:
    """The xdist group that keeps shared set-up on one worker; None lets the test go to any worker."""
    for name, group in _SHARED_PARTS.items():
        if name in item.fixturenames:
            return group
    for marker, group in _SHARED_MARKERS.items():
        if item.get_closest_marker(marker) is not None:
            return group
    info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the fixtures a test uses
    scopes = {d.scope for defs in (info.name2fixturedefs.values() if info else ()) for d in defs}
    if info is None or scopes & {"module", "class", "package"}:
        return item.nodeid.split("::", 1)[0]  # a module fixture (a shared simulator) starts once
    return None


def _listed(item: pytest.Item, entries: frozenset[str]) -> bool:
    """Whether a tier list (tests/tiers.py) names the test: its folder, its file, or the test itself."""
    path, _, rest = item.nodeid.removeprefix("tests/").partition("::")
    test = f"{path}::{rest.split('[', 1)[0]}"
    return path in entries or test in entries or any(path.startswith(n) for n in entries if n.endswith("/"))


def is_real(item: pytest.Item) -> bool:
    """Whether a test belongs to the real tier (`make test` only) rather than `make check`."""
    if _listed(item, REAL_FILES):
        return True
    if any(item.get_closest_marker(marker) is not None for marker in REAL_MARKERS):
        return True
    return "sshd" in item.fixturenames or "ssh_host" in item.fixturenames


@pytest.hookimpl(tryfirst=True)  # before xdist adds each group to the node id (its hook reads the markers)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = _group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        if is_real(item):
            item.add_marker(pytest.mark.real)
        if _listed(item, TIMING_FILES):
            if not is_real(item):  # `make check` runs `not real`: it would run there, beside anything
                raise pytest.UsageError(f"{item.nodeid} is a timing test outside the real tier: add it to REAL_FILES "
                                        "in tests/tiers.py (or mark it slow)")
            item.add_marker(pytest.mark.timing)


# Real parts a test needs, by words of its skip reason: what is missing, and the one command that brings it.
_REAL_PARTS = (
    ("sshd", "the loopback sshd", "openssh-server"),
    ("chromium", "headless Chromium (browser tests)", "chromium"),
    ("slurm", "a loopback Slurm cluster", "slurm-wlm munge"),
    ("podman", "a container engine (podman) that runs containers here", "podman runc catatonit"),
    (".venv-cpu", "the real CPU inference server", None),
    ("cpu-server", "the real CPU inference server", None),
    ("shared", "the shared real logs (../shared beside the checkout)", None),
)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Say plainly which real parts were skipped, and how to run them (a skipped suite looks green)."""
    skipped = terminalreporter.stats.get("skipped", [])
    missing: dict[str, int] = {}
    packages: list[str] = []
    for report in skipped:
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        for key, what, package in _REAL_PARTS:
            if key in reason:
                missing[what] = missing.get(what, 0) + 1
                if package and package not in packages:
                    packages.append(package)
                break
    if not missing:
        return
    terminalreporter.section("real parts skipped")
    for what, count in missing.items():
        terminalreporter.write_line(f"{count:4d} tests skipped: {what} is not on this machine")
    terminalreporter.write_line("Run them all as CI does: `bash .ci/run` (installs what is missing, as root), or:")
    if packages:
        terminalreporter.write_line(f"  sudo apt-get install -y {' '.join(packages)} && make test")
    if any("CPU" in what for what in missing):
        terminalreporter.write_line("  make cpu-server  # the CPU inference server's venv")
