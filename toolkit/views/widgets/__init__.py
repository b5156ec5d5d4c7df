"""Widgets: views over the toolkit's core state, never a second source of truth.

State lives in traits and bounded buffers; each widget redraws from its own throttle thread (~10 Hz), does
no SSH or HTTP in a callback (but Stop, on a thread), has a text `repr()`, and joins its threads in `close()`.

    >>> display(tkw.ServerPanel(server), tkw.LogView(server))             # doctest: +SKIP

DOM contract (what browser tests and a person's CSS may rely on)
----------------------------------------------------------------
LogView (`.tk-logview`)
    `.tk-count[data-total][data-benign][data-fatal][data-toolkit]`  "12,345 lines, 3 benign, 0 fatal"
    `.tk-log[data-lines]`           the scroller; `data-lines` = line elements shown
    `.tk-line.tk-<verdict>[data-verdict=<verdict>][data-line=<n>][data-rank][data-rule][title]`
        one per event, verdict in fatal|warning|benign|ready|metric|progress|info|shutdown; `title`
        reads "benign · rule: <rule> · phase: ... · line <n>". A grouped traceback's lines are in a
        child `.tk-context`. The toolkit's own requests (probes, scrapes) carry
        `.tk-toolkit[data-toolkit="1"]`, hidden unless the toggle is on.
    `.tk-filter-<verdict>` toggle buttons; `.tk-filter-toolkit`; the rank dropdown; the regex text box.
ServerPanel (`.tk-server-panel`)
    `.tk-status[data-state=starting|ready|failed|stopping|stopped][data-phase][data-elapsed-s]` containing
        `.tk-badge`, `.tk-elapsed`, `.tk-phase`, `a.tk-url`, `.tk-host`, `.tk-pid`, and when failed
        `.tk-error` > `.tk-error-kind`, `.tk-error-message`, `pre.tk-evidence`, `.tk-hint`; `.tk-stop`.
ResultsTable `.tk-results[data-rows] table.tk-table`; JournalSteps `.tk-steps[data-rows]`; EnvMatrix
`.tk-env[data-rows][data-columns]` with `td[data-status][title]`. Status-like cells carry `data-status`
and class `tk-status-<status>`.
"""

from toolkit.views.widgets._live import measure, show_live
from toolkit.views.widgets._log_view import LogView
from toolkit.views.widgets._server_panel import ServerPanel
from toolkit.views.widgets._tables import EnvMatrix, JournalSteps, ResultsTable

__all__ = ["LogView", "ServerPanel", "ResultsTable", "EnvMatrix", "JournalSteps", "measure", "show_live"]
