"""`python -m toolkit SUBCOMMAND ...`: see :mod:`toolkit.cli.main`."""

from __future__ import annotations

from toolkit.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
