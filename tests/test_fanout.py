"""Sweeps and A/B tests fanned out over three loopback SSH hosts (127.0.0.1, .2, .3 of one sshd).

They are one machine, so ``spec_for_host`` gives each host its own port and bind address. A
"slow node" is made the way a real one is: its server runs a slower build (a source tree
whose ``sim_perf.json`` has a decode step twice as long).
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from sim_process import free_port

from toolkit.benchmark import BenchResult, Load, bench
from toolkit.host.group import HostGroup
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.moves import compare_flag, sweep
from toolkit.moves.fan_out import HostPool
from toolkit.moves.plan import Plan
from toolkit.server.server import Server
from toolkit.server.spec import ServerSpec
from toolkit.views import plots as tk_plots

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(240)]
# What the tests that judge numbers measure: the three lanes' clients share this process, and side by side they
# stall each other (a paired A/B of no change read 0.32x to 1.69x in a full run): the lanes launch side by side
# but benchmark one at a time (bench_alone), the median ITL of one batch of three requests: the decode step itself
# (docs/fan-out.md)
STEADY = Load(num_prompts=3, input_len=8, output_len=24, max_concurrency=3)
ITL = "median_itl_ms"
EAGLE = {"--speculative-algorithm": "EAGLE3", "--speculative-num-steps": 2, "--speculative-eagle-topk": 1,
         "--speculative-num-draft-tokens": 3}


def base() -> ServerSpec:
    return ServerSpec.simulator(tp=1, port=free_port(), host="127.0.0.1", sim_startup_s=0.3, sim_warmup_s=0.05)


class PerHost:
    """A port and bind address per host (they are one machine); the slow host runs the slow build."""

    def __init__(self, slow: Host | None = None, slow_tree: Path | None = None) -> None:
        self.ports: dict[str, int] = {}
        self.slow, self.slow_tree = slow, slow_tree

    def __call__(self, host: Host, spec: ServerSpec) -> ServerSpec:
        flags: dict[str, object] = {"--port": self.ports.setdefault(host.name, free_port()), "--host": host.address}
        if self.slow is not None and host.name == self.slow.name:
            flags["--source-dir"] = str(self.slow_tree)
        return spec.with_flags(flags)

    def held(self, host: Host) -> list[int]:
        """The ports of this pool still held by a process (none, once every server stopped)."""
        return [port for port in self.ports.values() if host.port_holder(port) is not None]


@pytest.fixture
def slow_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "slow-node"
    tree.mkdir()
    (tree / "sim_perf.json").write_text(json.dumps({"schema": 1, "version": "slow-node",
                                                    "perf": {"decode_step_ms": 24.2}}))
    return tree


def test_six_combinations_on_three_hosts_run_two_each_side_by_side_and_record_where(
    ssh_hosts: list[Host], tmp_path: Path
) -> None:
    journal = Journal(tmp_path / "sweep.sqlite", investigation="fan-out")
    vary = {"--speculative-attention-mode": ["prefill", "decode"], "env:NCCL_ALGO": [None, "Ring", "Tree"]}
    adapt = PerHost()
    result = sweep(ssh_hosts, base().with_flags(EAGLE), vary=vary,
                   plan=Plan(bench=STEADY, journal=journal, spec_for_host=adapt, metric=ITL, bench_alone=True,
                             log_dir=str(tmp_path / "logs"), progress=True))
    print(f"\n{result}")
    frame = result.frame
    assert len(frame) == 6 and set(frame["status"]) == {"ok"} and list(frame["combination"]) == list(range(6))
    assert frame.groupby("host").size().to_dict() == {h.name: 2 for h in ssh_hosts}
    assert list(frame["host"]) == [ssh_hosts[i % 3].name for i in range(6)]  # combination v on host v % 3
    decode = frame[frame["--speculative-attention-mode"] == "decode"][ITL]
    prefill = frame[frame["--speculative-attention-mode"] == "prefill"][ITL]
    assert 1.4 * decode.max() < prefill.min()  # the verify step in decode mode: ~21 ms, in prefill mode ~38
    assert result.hosts == tuple(h.name for h in ssh_hosts)
    assert "each configuration ran on one host only" in repr(result)  # one launch each: hosts and configs alike

    runs = journal.results(wide=True).set_index("run_id")
    assert runs.loc[list(frame["run_id"]), "host"].tolist() == list(frame["host"])  # the journal knows where
    curated = journal.results()  # the people's view says where each configuration ran
    assert set(curated["hosts"]) == set(frame["host"])
    steps = journal.steps().set_index("step_id")
    assert steps.loc[list(frame["step_id"]), "hosts"].tolist() == list(frame["host"])
    assert set(steps["status"]) == {"done"}
    logs = {str(Path(p).parent.name) for p in (tmp_path / "logs").glob("*/*.log")}
    assert logs == {re.sub(r"[^A-Za-z0-9._-]+", "-", h.name) for h in ssh_hosts}  # a log folder per host
    assert adapt.held(ssh_hosts[0]) == [] and not any(ssh_hosts[0].is_alive(int(p)) for p in frame["server_pid"])


def test_repeats_rotate_over_hosts_and_a_slow_node_is_named_not_blamed_on_a_combination(
    ssh_hosts: list[Host], tmp_path: Path, slow_tree: Path
) -> None:
    slow = ssh_hosts[2]
    result = sweep(ssh_hosts, base().with_flags(EAGLE),
                   vary={"--speculative-attention-mode": ["prefill", "decode"]}, relaunch_each_repeat=True,
                   plan=Plan(repeats=6, bench=STEADY, spec_for_host=PerHost(slow, slow_tree), metric=ITL, bench_alone=True,
                             log_dir=str(tmp_path / "logs"), progress=False))  # two launches per host and combination:
    print(f"\n{result}")                                            # enough to tell a slow node on a busy machine
    frame = result.frame
    assert len(frame) == 12 and set(frame["status"]) == {"ok"}
    for _, runs in frame.groupby("combination"):  # each combination's six launches: two on each host
        assert sorted(runs["host"]) == sorted(h.name for h in ssh_hosts for _ in range(2))
    effects = result.host_effects(ITL)
    assert effects is not None and effects.identifiable
    flagged = [e for e in effects.effects if e.beyond_noise]
    assert [e.host for e in flagged] == [slow.name] and flagged[0].ratio > 1.25  # a step twice as long
    assert f"{slow.name} runs at" in effects.text and "a slow node" in effects.text
    table = result.table(ITL)
    assert table["ratio"].iloc[1] < 1 / 1.4  # decode's verify step still shorter on every host, the slow one included
    png = tmp_path / "by-host.png"
    tk_plots.sweep(result, by_host=True).savefig(png, dpi=60)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_over_three_hosts_pairs_by_host_so_a_slow_node_is_not_a_slow_flag(
    ssh_hosts: list[Host], tmp_path: Path, slow_tree: Path
) -> None:
    slow = ssh_hosts[1]
    journal = Journal(tmp_path / "ab.sqlite", investigation="fan-out A/B")
    ab = compare_flag(ssh_hosts, base(), "env:NCCL_ALGO", None, "Tree", expect=None,
                      plan=Plan(repeats=3, bench=STEADY, journal=journal, metric=ITL, bench_alone=True,
                                spec_for_host=PerHost(slow, slow_tree), log_dir=str(tmp_path / "logs"),
                                progress=False))
    print(f"\n{ab!r}")
    assert ab.verdict == "within_noise" and ab.comparison.method == "paired_t_by_block"
    assert "paired by host" in ab.summary_text and "3+3 runs" in ab.summary_text
    assert ab.host_effects is not None and f"{slow.name} runs at" in ab.host_effects.text
    frame = ab.frame
    assert sorted(frame["block"]) == [0, 0, 1, 1, 2, 2]
    for _, block in frame.groupby("block"):  # a block: A and B on one host
        assert block["host"].nunique() == 1 and sorted(block["side"]) == ["a", "b"]
    order = {h: "".join(frame[frame["host"] == h]["side"]) for h in frame["host"]}
    assert order == {ssh_hosts[0].name: "ab", ssh_hosts[1].name: "ba", ssh_hosts[2].name: "ab"}  # both sides at once
    steps = journal.steps()
    assert all(set(hosts.split(", ")) == {h.name for h in ssh_hosts} for hosts in steps["hosts"])
    assert ab.host_effects.text in steps.iloc[1]["notes"]
    assert sorted(journal.results(wide=True)["host"]) == sorted(frame["host"])


def test_a_real_difference_survives_a_slow_node(ssh_hosts: list[Host], tmp_path: Path, slow_tree: Path) -> None:
    ab = compare_flag(ssh_hosts, base().with_flags(EAGLE), "--speculative-attention-mode", "prefill", "decode",
                      plan=Plan(repeats=5, bench=STEADY, spec_for_host=PerHost(ssh_hosts[0], slow_tree), metric=ITL, bench_alone=True,
                                log_dir=str(tmp_path / "logs"), progress=False))
    print(f"\n{ab!r}")
    assert ab.verdict == "b_faster" and ab.ratio < 1 / 1.5 and ab.comparison.ci_high < 0  # decode's step: shorter
    assert ab.host_effects is not None and ab.host_effects.of(ssh_hosts[0].name).ratio > 1.1  # type: ignore[union-attr]
    assert isinstance(tk_plots.ab(ab, by_host=True), Figure)


def test_ctrl_c_on_one_host_stops_the_servers_on_every_host(ssh_hosts: list[Host], tmp_path: Path) -> None:
    journal = Journal(tmp_path / "stop.sqlite", investigation="interrupt")
    started = threading.Barrier(3, timeout=120)
    pids: list[int] = []

    def bench_or_interrupt(server: Server) -> BenchResult:
        pids.append(server.pid)
        started.wait()  # every host is serving now
        if server.host.name == ssh_hosts[1].name:
            raise KeyboardInterrupt
        return bench(server, Load(num_prompts=1, input_len=8, output_len=4000), progress=False)  # ~50 s unless cut

    adapt = PerHost()
    with pytest.raises(KeyboardInterrupt) as raised:
        sweep(ssh_hosts, base(), vary={"--sim-seed": [1, 2, 3, 4, 5, 6]},
              plan=Plan(bench=bench_or_interrupt, journal=journal, spec_for_host=adapt,
                        log_dir=str(tmp_path / "logs"), progress=False))
    assert any("sweep interrupted at combination 2 of 6" in note for note in raised.value.__notes__)
    steps = journal.steps()
    assert list(steps["status"]) == ["interrupted"] * 3  # the other hosts' benchmarks were cut, not awaited
    assert len(pids) == 3 and not any(ssh_hosts[0].is_alive(pid) for pid in pids)
    assert adapt.held(ssh_hosts[0]) == []


def test_a_pool_takes_a_host_group_or_a_list_and_refuses_duplicates(ssh_hosts: list[Host]) -> None:
    assert HostPool(HostGroup(ssh_hosts)).hosts == tuple(ssh_hosts)
    assert len(HostPool(ssh_hosts[0])) == 1
    with pytest.raises(ValueError, match="given more than once: a host runs one server at a time"):
        HostPool([ssh_hosts[0], ssh_hosts[0]])
    with pytest.raises(TypeError, match="hosts must be Host, SlurmTarget or ContainerTarget objects"):
        HostPool(["127.0.0.1"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no hosts given"):
        HostPool([])
