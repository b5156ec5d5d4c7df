"""How long the flag check takes cold, and again in a fresh process that reads the --help text kept on disk.

``vllm serve --help=all`` took 24-31 s on the GPU machine (issue 23). The first check runs it and keeps
the text (``toolkit/server/help_cache.py``); a second check of the same release on the same host, in
another process, reads it from disk. Prints both times (seconds) and what the second one ran.

    .venv/bin/python benchmarks/flag_check_cache.py    # a wrapper install as on the GPU machine, the simulator's --help
    /tmp/vv/bin/python benchmarks/flag_check_cache.py --python /tmp/vv/bin/python --model /tmp/m   # real vLLM
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from toolkit.host.host import Host  # noqa: E402
from toolkit.server.flag_check import FlagTableCache  # noqa: E402
from toolkit.server.help_cache import HelpTextCache  # noqa: E402
from toolkit.server.preflight import validate_spec  # noqa: E402
from toolkit.server.release import ReleaseCache  # noqa: E402
from toolkit.server.spec import ServerSpec  # noqa: E402
from toolkit.testbeds.wrapped_engine import wrapped_vllm  # noqa: E402

_SECOND = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from toolkit.host.host import Host
from toolkit.server.help_cache import HelpTextCache
from toolkit.server.preflight import validate_spec
from toolkit.server.spec import ServerSpec
spec = ServerSpec.from_dict(json.loads(sys.argv[2]))
start = time.monotonic()
validate_spec(Host.local(), spec, help_texts=HelpTextCache(sys.argv[3]))
print(f"{time.monotonic() - start:.3f}")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=None, help="the engine's interpreter; default: the simulator")
    parser.add_argument("--model", default="/tmp/m")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="help-cache-")
    python = args.python or str(wrapped_vllm(Path(folder) / "install"))
    spec = ServerSpec.vllm(args.model, python=python, **{"--max-model-len": 2048})
    start = time.monotonic()
    validate_spec(Host.local(), spec, cache=FlagTableCache(), releases=ReleaseCache(), help_texts=HelpTextCache(folder))
    first = time.monotonic() - start
    ran = subprocess.run([sys.executable, "-c", _SECOND, str(REPO), json.dumps(spec.to_dict()), folder],
                         capture_output=True, text=True, check=True)
    print(f"first check (runs --help): {first:.3f} s")
    print(f"second check, fresh process (reads {folder}): {float(ran.stdout.strip()):.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
