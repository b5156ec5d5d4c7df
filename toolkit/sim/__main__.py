"""`python -m toolkit.sim` (toolkit/sim/cli.py); `--version` and `--help` are answered before the server
(about 0.5 s of CPU) is imported: the toolkit asks them before every launch, on the cores it measures on.
"""

import sys

from toolkit.sim.args import parse_server_args

_ARGS = sys.argv[1:]
if _ARGS[:1] not in (["make-repo"], ["telemetry"]) and {"-h", "--help", "--version"} & set(_ARGS):
    parse_server_args(_ARGS)  # argparse prints the answer and exits; if it does not, serve as usual

from toolkit.sim.cli import main  # noqa: E402

raise SystemExit(main())
