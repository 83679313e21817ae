"""Operating a running ``newsflow run`` / ``newsflow poll``: metrics and health over HTTP, logs.

* :func:`serve` starts a small HTTP server in a daemon thread: ``/metrics`` (Prometheus text
  format, every metric of ``newsflow.flows.metrics``) and ``/healthz`` (JSON, HTTP 200 while
  the process works, 503 when its health check says otherwise). A port already in use is
  reported in one warning line and the command goes on without metrics: the news must flow.
* :class:`LagMonitor` polls the ``feeds.raw`` end offsets every few seconds and sets the
  consumer-lag gauges against the offsets the flow has read.
* :func:`setup_logging` configures ``text`` or ``json`` (one JSON object per line) logs.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import orjson
from prometheus_client import REGISTRY, make_wsgi_app

#: documented default ports (README, docker-compose.yml)
RUN_METRICS_PORT = 9400
POLL_METRICS_PORT = 9401

log = logging.getLogger("newsflow")

Health = Callable[[], dict[str, Any]]

#: the terminal's stderr while ``newsflow.cli.ops.without_rust_panics`` filters file
#: descriptor 2 through a pipe (None: descriptor 2 is the terminal's)
_terminal_stderr: int | None = None


def set_terminal_stderr(fd: int | None) -> None:
    global _terminal_stderr
    _terminal_stderr = fd


def exit_now(line: str, code: int = 0) -> NoReturn:
    """End the process at once, without unwinding through Bytewax, with ``line`` on the
    terminal's stderr (written directly: a filtering pipe's reader would not get to it)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(_terminal_stderr if _terminal_stderr is not None else 2, (line + "\n").encode())
    os._exit(code)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingWSGIServer(WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


def health_app(health: Health, metrics_app: Any) -> Any:
    """WSGI app: ``/healthz`` -> the health dict as JSON (``ok`` false -> 503), else metrics."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "/")
        if path in ("/healthz", "/health"):
            try:
                h = health()
            except Exception as e:  # a broken health check is itself unhealthy
                h = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            body = orjson.dumps(h, option=orjson.OPT_SORT_KEYS) + b"\n"
            start_response("200 OK" if h.get("ok") else "503 Service Unavailable",
                           [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        if path in ("/", "/metrics"):
            return metrics_app(environ, start_response)  # type: ignore[no-any-return]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /metrics or /healthz\n"]

    return app


class MetricsServer:
    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        host, port = server.server_address[:2]
        self.host: str = host if isinstance(host, str) else host.decode()
        self.port: int = port

    @property
    def url(self) -> str:
        host = "localhost" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def serve(port: int, host: str = "0.0.0.0", health: Health | None = None) -> MetricsServer | None:
    """``/metrics`` and ``/healthz`` on ``host:port`` in a daemon thread; None when ``port`` is 0
    or can't be bound (one warning line on stderr)."""
    if not port:
        return None
    started = time.time()

    def default_health() -> dict[str, Any]:
        return {"ok": True, "uptime_s": round(time.time() - started, 1)}

    app = health_app(health or default_health, make_wsgi_app(REGISTRY))
    try:
        server = make_server(host, port, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
    except OSError as e:
        print(f"warning: metrics not served: cannot listen on {host}:{port} ({e.strerror or e}); "
              "use --metrics-port to pick another port, 0 for none", file=sys.stderr)
        return None
    t = threading.Thread(target=server.serve_forever, name="newsflow-metrics", daemon=True)
    t.start()
    return MetricsServer(server, t)


class LagMonitor:
    """Every ``interval_s``: the end offset of each ``topic`` partition -> lag gauges
    (``newsflow.flows.metrics.set_lag``). Runs in a daemon thread; errors are logged, not raised."""

    def __init__(self, brokers: Sequence[str], topic: str, interval_s: float = 5.0) -> None:
        self.brokers = list(brokers)
        self.topic = topic
        self.interval_s = interval_s
        self.last_ok: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="newsflow-lag", daemon=True)

    def start(self) -> LagMonitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval_s + 15)

    def check(self, consumer: Any) -> dict[int, int]:
        from confluent_kafka import TopicPartition

        from newsflow.flows import metrics

        md = consumer.list_topics(self.topic, timeout=10)
        t = md.topics.get(self.topic)
        if t is None or t.error is not None:
            return {}
        highs = {p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10, cached=False)[1]
                 for p in sorted(t.partitions)}
        metrics.set_lag(highs)
        self.last_ok = time.time()
        return highs

    def _run(self) -> None:
        import uuid

        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": ",".join(self.brokers), "group.id": f"newsflow-lag-{uuid.uuid4().hex}",
                      "enable.auto.commit": False, "log_level": 0, "error_cb": lambda _e: None})
        try:
            while True:
                try:
                    self.check(c)
                except Exception as e:  # the broker may be away for a while: report, retry
                    log.warning("lag check failed: %s", e)
                if self._stop.wait(self.interval_s):
                    return
        finally:
            c.close()


# ------------------------------------------------------------------------------ logs
class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts`` (UTC ISO 8601), ``level``, ``logger``, ``msg`` and any
    ``extra={...}`` fields."""

    _STD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        d: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in vars(record).items():
            if k not in self._STD and not k.startswith("_"):
                d[k] = v
        if record.exc_info:
            d["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(d, default=str).decode()


def setup_logging(fmt: str = "text", level: str | int = "INFO", stream: Any = None) -> None:
    """Logs of the ``newsflow`` loggers to stderr, as text lines or JSON lines (the root logger
    and other libraries' handlers are left alone)."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.set_name("newsflow-cli")
    for h in [h for h in log.handlers if h.get_name() == "newsflow-cli"]:
        log.removeHandler(h)
    log.addHandler(handler)
    log.setLevel(level if isinstance(level, int) else level.upper())
    log.propagate = False


class StatusLogger:
    """Logs one status line every ``interval_s`` (``status`` returns the fields)."""

    def __init__(self, status: Callable[[], dict[str, Any]], interval_s: float = 60.0) -> None:
        self.status = status
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="newsflow-status", daemon=True)

    def start(self) -> StatusLogger:
        if self.interval_s > 0:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            fields = self.status()
            log.info("status " + " ".join(f"{k}={v}" for k, v in fields.items()), extra=fields)
