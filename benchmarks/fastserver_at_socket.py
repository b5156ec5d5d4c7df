"""fastserver.py with one more truth: when each request's bytes reached the server's protocol.

fastserver's TTFT runs from its handler's entry to the first token write. Under 256 streams its
one core spends each 8 ms step spinning (2 ms) and writing a token to every stream, so a request
that has arrived waits in aiohttp's queue for the loop before its handler starts: that wait is the
server's, and a client measuring from its own send sees it, rightly. This wrapper runs the peers'
fastserver unchanged (imported from where it lies, never copied) and stamps ``perf_counter()`` in
aiohttp's ``RequestHandler.data_received`` (the moment the server process first holds the bytes),
then adds to ``/stats``:

- ``ttft_socket_p50_ms``: bytes received -> first token write, the TTFT a client can be held to;
- ``queue_p50_ms`` / ``queue_p99_ms``: bytes received -> handler entry, the server's own queue.

The bytes may still wait in the kernel before ``data_received`` (while the loop spins), so this
truth is a lower bound of the server's share, not all of it. The stamp costs one clock read and
one dict store per read, beside aiohttp's own parse.

    python benchmarks/fastserver_at_socket.py --fastserver /tmp/peers/fastserver.py -- --port 8000 --delay-ms 8 --step
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from typing import Any

from aiohttp import web, web_protocol


def load(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("fastserver", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {path}: is it fastserver.py from shared/peers?")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stamp_arrivals(fs: Any) -> None:
    """Give every request record an ``rx`` time: the last read on its connection before it."""
    clock = time.perf_counter
    received: dict[int, float] = {}  # id(protocol) -> last read (RequestHandler has __slots__)
    current: list[float | None] = [None]
    data_received = web_protocol.RequestHandler.data_received

    def stamped(self: web_protocol.RequestHandler, data: bytes) -> None:
        received[id(self)] = clock()
        data_received(self, data)

    web_protocol.RequestHandler.data_received = stamped  # type: ignore[method-assign]

    class Records(list):  # type: ignore[type-arg]
        def append(self, rec: dict[str, Any]) -> None:
            rec["rx"] = current[0]  # the handler appends before its first await: no other request ran
            super().append(rec)

    reset, summary, make_app = fs.Truth.reset, fs.Truth.summary, fs.make_app

    def reset_records(self: Any) -> None:
        reset(self)
        self.records = Records()

    def summary_at_socket(self: Any, last: int = 0) -> dict[str, Any]:
        out = summary(self, last)
        recs = sorted((r for r in self.records if r.get("last") is not None), key=lambda r: r["arrival"])
        recs = [r for r in (recs[-last:] if last else recs) if r.get("rx") is not None]
        ms = lambda xs, q: fs._pct(xs, q) * 1000.0 if xs else None  # noqa: E731
        queue = [r["arrival"] - r["rx"] for r in recs]
        out.update(ttft_socket_p50_ms=ms([r["first"] - r["rx"] for r in recs], 0.5),
                   queue_p50_ms=ms(queue, 0.5), queue_p99_ms=ms(queue, 0.99))
        return out

    def make_stamped_app(cfg: Any) -> web.Application:
        app = make_app(cfg)

        @web.middleware
        async def note_arrival(request: web.Request, handler: Any) -> web.StreamResponse:
            current[0] = received.get(id(request.protocol))
            return await handler(request)

        app.middlewares.append(note_arrival)
        return app

    fs.Truth.reset, fs.Truth.summary, fs.make_app = reset_records, summary_at_socket, make_stamped_app
    fs.TRUTH.reset()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fastserver", required=True, help="the peers' fastserver.py")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then fastserver's own arguments")
    a = ap.parse_args()
    fs = load(a.fastserver)
    stamp_arrivals(fs)
    sys.argv = [a.fastserver, *(a.args[1:] if a.args[:1] == ["--"] else a.args)]
    fs.main()


if __name__ == "__main__":
    main()
