"""Which tests are the real tier (`make test` only) rather than the edit loop's `make check`.

tests/conftest.py marks them `real`; a folder, a file or one test per entry (data, read by a test).
"""

from __future__ import annotations

# Files (under tests/) whose tests start real processes, servers or notebooks: the real tier. Every other
# test is in `make check` unless it is marked with one of REAL_MARKERS. A test below that is fast belongs
# in its own file in the check tier; tests/test_tiers.py keeps this list true (each name exists).
# An entry is a folder (`system/`), a file, or one test (`file::test_name`, all its parameters).
REAL_FILES = frozenset({
    "system/",
    # launch, follow, stop real processes: the simulator, drivers, ranks
    "test_orphans.py", "test_observe_sim.py", "test_sim_server.py", "test_truthful_errors.py",
    "test_sim_faults.py", "test_sim_repo.py", "test_sim_args.py", "test_source_layout.py", "test_report_sim.py",
    "test_bisect_driver.py", "test_abtest_sim.py", "test_measure.py", "test_releases_e2e.py",
    "test_secrets_everywhere.py", "test_journal_processes.py", "test_bench_client.py", "test_bench_sim.py",
    "test_realserver.py", "test_profiled_and_dcgm.py", "test_fanout.py", "test_bisect_fanout.py",
    "test_sweep_sim.py", "test_envcheck_driver.py",
    "test_ssh_key_errors.py", "test_peers.py", "test_widgets.py", "test_fastserver_at_socket.py",
    # figures rendered by matplotlib; long reports
    "test_plots.py", "test_report_long.py",
    # one test each that starts Python processes, a notebook or a CLI
    "test_public_api.py::test_every_subcommand_answers_help_with_its_own_name",
    "test_public_api.py::test_bench_is_the_function_in_any_import_order",
    "test_report.py::test_html_parses_and_holds_every_step_title",
    "test_report.py::test_cli_writes_the_report",
    "test_journal.py::test_a_fresh_process_finds_everything",
    "test_journal_files.py::test_a_write_the_file_system_refuses_is_a_journal_error",
    "test_journal_investigations.py::test_running_a_notebook_twice_gives_two_investigations_and_says_so",
})

# Tests whose verdict rests on measured speed (a bisection, an A/B, a diagnosis, the bench client's timings, the
# simulator's own rates). On two cores, anything beside them at the same priority (a TP-8 simulator starting, a
# notebook kernel, Chromium, another bisection) stalls their servers or clients: runs of 1.2 s measured 3-4 s and
# bisections named the wrong commit, at nice 10 too. tests/conftest.py marks them `timing`; `make test`
# (scripts/test_tiers.sh) runs them beside the rest in one process at real-time priority (`chrt -f 1`, which their
# servers and sshd inherit): a real-time task that wakes takes a core at once, so the rest of the suite cannot stall
# them (every one passed beside the rest in three full runs); where real-time priority is refused they run after the
# rest, alone. The fan-out tests (three lanes' clients in this one process) judge the median ITL of a batch, which an
# idle run reads exactly (a slow node at 2.00x, 95% CI 1.96-2.04x) (docs/fan-out.md). Entries are spelt as above;
# each is in the real tier too. scripts/test_tiers.sh keeps the timing tier on the machine's last core: beside
# real-time simulators starting on any core, a normal process waited 100-350 ms at a time (a bisection of 0.4 s runs
# read 0.25 ms median ITLs, tokens read in bursts), so the notebooks whose verdicts rest on measured speed run on the
# other cores (`execute(..., off_timing_core=True)` in tests/system/test_notebooks.py).
TIMING_FILES = frozenset({
    "test_bisect_fanout.py", "test_bisect_driver.py", "test_abtest_sim.py", "test_diagnose_sim.py",
    "test_fanout.py", "test_bench_client.py", "test_bench_sim.py", "test_sweep_sim.py", "test_measure.py",
    "test_peers.py", "test_sim_server.py",
})
