"""``python -m toolkit report JOURNAL --out DIR``: the post-mortem, or one line on stderr saying why not.

A corrupt journal or an unwritable folder is an expected failure: the cause and the fix, not a
traceback (issue 20). Exit status 2 for those and a wrong command line, 130 for Ctrl-C.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence

from toolkit.errors import ToolkitError
from toolkit.report.postmortem import main as write_report

__all__ = ["main"]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return write_report(argv)
    except KeyboardInterrupt:
        print("interrupted: the report was not written (Ctrl-C)", file=sys.stderr)
        return 130
    except ToolkitError as exc:
        hint = f"; what to do: {exc.hint}" if exc.hint else ""
        print(_one_line(f"error: {exc.message}{hint}"), file=sys.stderr)
    except sqlite3.Error as exc:
        print(_one_line(f"error: the journal cannot be read: {exc}; check that it is an intact journal file "
                        "(copy it to a writable folder if it sits on a read-only one)"), file=sys.stderr)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(_one_line(f"error: {where}{exc.strerror or exc}; the journal must be readable, and --out a folder "
                        "you can create and write"), file=sys.stderr)
    return 2
