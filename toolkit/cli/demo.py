"""`python -m toolkit demo`: the onboarding walkthrough, executed headless, written to out/.

The executed notebook is the record (widget state included), beside its journal and post-mortem.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["main", "run_demo"]

REPO = Path(__file__).resolve().parents[2]  # toolkit/cli/demo.py -> the checkout
NOTEBOOK = REPO / "notebooks" / "01_onboarding_eagle3.ipynb"


def run_demo(out_dir: Path, *, ssh_host: str = "auto", progress: bool = True) -> dict[str, Path]:
    """Execute the onboarding notebook into `out_dir`; return the paths a person opens."""
    import papermill
    from traitlets.config import Config

    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    executed = out_dir / NOTEBOOK.name
    journal = out_dir / "eagle3.sqlite"
    for stale in (journal, out_dir / "eagle3.sqlite-wal", out_dir / "eagle3.sqlite-shm"):
        stale.unlink(missing_ok=True)  # a demo is a fresh replay, not a continuation
    papermill.execute_notebook(
        str(NOTEBOOK), str(executed), cwd=str(NOTEBOOK.parent), progress_bar=progress, log_output=False,
        parameters={"out_dir": str(out_dir), "journal_path": str(journal), "ssh_host": ssh_host},
        # The kernel talks to papermill over Unix sockets beside its connection file (jupyter_client
        # connect.py _ip_default), not over loopback TCP: nothing another user of the machine can reach,
        # and ipykernel 7 does not warn "Kernel is running over TCP without encryption" for it.
        config=Config({"KernelManager": {"transport": "ipc"}}))
    return {"notebook": executed, "journal": journal, "markdown": out_dir / "postmortem.md",
            "html": out_dir / "postmortem.html"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m toolkit demo", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out", help="where to write the results (default: out/)")
    parser.add_argument("--ssh-host", default="auto",
                        help="auto (SSH to localhost if it trusts us, else local), '' (local), or a host name")
    args = parser.parse_args(argv)
    if not NOTEBOOK.exists():
        print(f"error: {NOTEBOOK} is missing: run the demo from a checkout of the repository", file=sys.stderr)
        return 2
    started = time.monotonic()
    print("Replaying the EAGLE-3 investigation on the simulator (notebooks/01_onboarding_eagle3.ipynb)...")
    try:
        paths = run_demo(Path(args.out), ssh_host=args.ssh_host)
    except Exception as exc:  # papermill's error names the failing cell; say where the partial record is
        print(f"\nerror: the walkthrough failed: {exc}", file=sys.stderr)
        print(f"the partly executed notebook is in {Path(args.out).resolve()}", file=sys.stderr)
        return 1
    print(f"\nDone in {time.monotonic() - started:.0f} s. Open:")
    for what, path in paths.items():
        print(f"  {what:9} {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
