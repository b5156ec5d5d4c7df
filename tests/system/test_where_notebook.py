"""notebooks/06: one step, run over SSH, as a Slurm job and in a container; the journal says where each ran."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_process import free_port
from system.containers import LocalPodman
from system.slurm import LoopbackSlurm
from system.sshd import LoopbackSshd
from system.test_notebooks import execute, text_of

from toolkit.journal import Journal

pytestmark = [pytest.mark.slow, pytest.mark.ssh, pytest.mark.slurm, pytest.mark.container]


def test_the_same_step_runs_over_ssh_on_slurm_and_in_a_container(
    sshd: LoopbackSshd, slurm: LoopbackSlurm, podman: LocalPodman, tmp_path: Path
) -> None:
    journal = tmp_path / "where.sqlite"
    notebook = execute(
        "06_where_servers_run.ipynb", tmp_path, journal_path=str(journal), log_dir=str(tmp_path / "logs"),
        port=free_port(), ssh_host="127.0.0.1", ssh_port=sshd.port, ssh_user=sshd.user,
        ssh_key=str(sshd.client_key), known_hosts=str(sshd.known_hosts), slurm=True, slurm_conf=str(slurm.conf),
        container_engine="podman", container_rootfs=str(podman.rootfs), container_gpus=None,
        container_network="host", container_mounts=list(podman.mounts),
        container_run_options=list(podman.run_options), container_engine_options=list(podman.engine_options),
    )
    text = text_of(notebook)
    assert "slurm default via" in text and "podman rootfs on" in text
    steps = Journal(journal, read_only=True).steps().set_index("title")
    assert set(steps.index) == {"baseline via ssh", "baseline via slurm", "baseline via container"}
    assert set(steps["status"]) == {"done"}
    notes = {title: str(text) for title, text in steps["notes"].items()}
    assert "ran in slurm job " in notes["baseline via slurm"] and " on loop" in notes["baseline via slurm"]
    assert "ran in container toolkit-sglang-sim" in notes["baseline via container"], notes
    assert f"{sshd.user}@127.0.0.1:{sshd.port} (pid " in text  # the runs table: where tk.measure's server ran
    panels = [line for line in text.splitlines() if line.startswith("ServerPanel:")]
    assert len(panels) == 3 and all(p.startswith("ServerPanel: stopped") for p in panels), panels  # shown live
    assert steps.loc["baseline via slurm", "hosts"].startswith("slurm default via ")
    results = Journal(journal, read_only=True).results(wide=True)
    assert list(results["completed"]) == [8, 8, 8]
    assert slurm.jobs() == [] and not [name for name in podman.names() if name.startswith("toolkit-")]
