"""`python -m toolkit.sim`: see toolkit/sim/cli.py and docs/simulator.md."""

from toolkit.sim.cli import main

raise SystemExit(main())
