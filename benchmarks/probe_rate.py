"""How often does wait_ready probe a server that never becomes ready? (issue 13: 2,769 probes in 300 s)

Launches the simulated SGLang server (its default release, 0.5.23) with a warm-up that never ends
within the wait, so ``/health_generate`` answers 503 (no body: "still starting") to every probe,
waits ``--wait-s`` seconds with ``wait_ready`` (which then raises ReadinessTimeout), and counts the
probes in the server's own access log. Prints probes per minute, over the whole wait and over its
last third (the back-off makes the rate fall as time passes).

    python benchmarks/probe_rate.py --wait-s 120
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from sim_process import free_port  # noqa: E402

from toolkit.errors import ReadinessTimeout  # noqa: E402
from toolkit.host.host import Host  # noqa: E402
from toolkit.server.launch import launch  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402

_PROBE = re.compile(r"^\[(?P<stamp>[^\]]+)\] INFO: +\S+ - \"GET /health_generate HTTP/1.1\" 503")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wait-s", type=float, default=120.0)
    ns = parser.parse_args(argv)
    spec = ServerSpec.simulator(tp=1, port=free_port(), host="127.0.0.1", sim_startup_s=0.5,
                                sim_warmup_s=ns.wait_s * 10)
    with launch(Host.local(), spec, log_dir=tempfile.mkdtemp()) as server:
        started = time.time()
        with contextlib.suppress(ReadinessTimeout):  # the point: it never becomes ready
            server.wait_ready(timeout_s=ns.wait_s)
        log = Path(server.log_path).read_text().splitlines()
    stamps = [time.mktime(time.strptime(m["stamp"], "%Y-%m-%d %H:%M:%S")) for line in log if (m := _PROBE.match(line))]
    span = time.time() - started
    late = [s for s in stamps if s >= started + 2 * span / 3]
    print(f"{len(stamps)} probes in {span:.0f} s: {60 * len(stamps) / span:.1f} per minute; "
          f"last third {60 * len(late) / (span / 3):.1f} per minute")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
