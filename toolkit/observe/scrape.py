"""Scrape a server's Prometheus ``/metrics`` at a set interval while a run is measured.

vLLM mounts ``/metrics`` always; SGLang only with ``--enable-metrics`` (sglang 0.5.9
entrypoints/http_server.py), so a 404 there ends the scraping with a note naming the missing flag.

>>> with MetricsScraper(server.url, profile_for("vllm", "0.33.0").metrics, interval_s=1.0) as scraper:  # doctest: +SKIP
...     tk.bench(server, num_prompts=64)
>>> scraper.rows()[0].values["running_requests"]  # doctest: +SKIP
"""

from __future__ import annotations

import threading
import time
from collections import deque
from datetime import datetime

from toolkit.engines import MetricNames
from toolkit.logs import MetricRow
from toolkit.observe.prometheus import server_metric_values
from toolkit.prometheus_text import parse_prometheus
from toolkit.server.http import HttpAnswer, request

__all__ = ["MetricsScraper", "scrape_metrics"]


def scrape_metrics(url: str, path: str = "/metrics", *, timeout_s: float = 2.0,
                   max_bytes: int = 8 << 20) -> HttpAnswer:
    """``GET {path}``: the Prometheus text page (open without an API key on both engines)."""
    return request(url.rstrip("/") + path, timeout_s=timeout_s, max_bytes=max_bytes)


class MetricsScraper:
    """Scrapes ``url + path`` every ``interval_s`` on its own thread, from ``start()`` to ``stop()``.

    Never raises for an HTTP failure: ``note`` says how many scrapes there were, or why none.
    """

    def __init__(self, url: str, names: MetricNames, *, path: str = "/metrics", interval_s: float = 1.0,
                 capacity: int = 100_000) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.url = url
        self.names = names
        self.path = path
        self.interval_s = interval_s
        self.note = "not started"
        self._rows: deque[MetricRow] = deque(maxlen=capacity)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._failures: list[str] = []

    def start(self) -> MetricsScraper:
        if self._thread is None:
            self._stop.clear()
            self.note = f"scraping {self.path} every {self.interval_s:g} s"
            self._thread = threading.Thread(target=self._loop, name=f"metrics-{self.url}", daemon=True)
            self._thread.start()
        return self

    def scrape_once(self) -> MetricRow | None:
        """One scrape now; None when the page is missing or holds none of the engine's series."""
        at = time.time()
        answer = scrape_metrics(self.url, self.path, timeout_s=max(self.interval_s, 1.0))
        if answer.status != 200:
            reason = f"HTTP {answer.status}" if answer.status else str(answer.error)
            if answer.status == 404 and self.names.enabled_by:
                reason += f": the server has no {self.path}; launch it with {self.names.enabled_by}"
            self._failures.append(reason)
            return None
        values = server_metric_values(parse_prometheus(answer.body.decode("utf-8", "replace")), self.names)
        if not values:
            self._failures.append(f"{self.path} holds none of {self.names.running}, {self.names.waiting}, ...")
            return None
        return MetricRow("prometheus", dict(values), datetime.fromtimestamp(at), None, 0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            row = self.scrape_once()
            if row is not None:
                with self._lock:
                    self._rows.append(row)
            elif self._failures and self._failures[-1].startswith("HTTP 404"):
                return  # the route does not exist: asking again every second changes nothing
            self._stop.wait(self.interval_s)

    def stop(self) -> list[MetricRow]:
        """Stop scraping; idempotent. Returns the rows kept."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=10)
        rows = self.rows()
        if rows:
            self.note = f"{self.path}: {len(rows)} scrapes every {self.interval_s:g} s"
        elif self._failures:
            self.note = f"{self.path} gave nothing: {self._failures[-1]}"
        return rows

    def rows(self) -> list[MetricRow]:
        with self._lock:
            return list(self._rows)

    def __enter__(self) -> MetricsScraper:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
