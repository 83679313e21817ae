"""Operations: the metrics / health / log options of ``run`` and ``poll``, and ``newsflow health``.

``newsflow run`` serves ``http://<host>:9400/metrics`` and ``/healthz`` by default, ``newsflow
poll`` the same on port 9401 (``--metrics-port P``, 0 = off). ``newsflow health`` asks a running
one (exit 0 healthy, 1 unhealthy or unreachable): the health check of docker-compose.yml.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from newsflow.connectors.observability import POLL_METRICS_PORT, RUN_METRICS_PORT

log = logging.getLogger("newsflow")


def add_observability_args(p: argparse.ArgumentParser, default_port: int) -> None:
    g = p.add_argument_group("observability")
    g.add_argument("--metrics-port", type=int, default=default_port, metavar="P",
                   help=f"serve Prometheus /metrics and /healthz on this port (default {default_port}; 0 = off)")
    g.add_argument("--metrics-host", default="0.0.0.0", metavar="H",
                   help="address to serve metrics on (default 0.0.0.0; 127.0.0.1 for this machine only)")
    g.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="log lines on stderr as text (default) or one JSON object per line")
    g.add_argument("--status-interval", type=float, default=60.0, metavar="S",
                   help="log a status line (counts, lag) every S seconds (default 60; 0 = off)")


@contextmanager
def observed(name: str, args: argparse.Namespace, status: Callable[[], dict[str, Any]], *,
             brokers: Sequence[str] | None = None, lag_topic: str | None = None,
             startup_grace_s: float = 60.0,
             health_extra: Callable[[], dict[str, Any]] | None = None) -> Iterator[Any]:
    """Logs, ``/metrics`` + ``/healthz`` and (with ``lag_topic``) consumer lag around a command;
    ``health_extra`` adds fields to ``/healthz`` only (an ``unhealthy`` reason makes it 503)."""
    from newsflow.connectors.observability import LagMonitor, StatusLogger, serve, setup_logging
    from newsflow.flows.metrics import own_metrics

    setup_logging(args.log_format)
    own_metrics(name)
    started = time.time()
    lag: LagMonitor | None = None

    def health() -> dict[str, Any]:
        now = time.time()
        h: dict[str, Any] = {"service": name, "uptime_s": round(now - started, 1), **status(),
                             **(health_extra() if health_extra is not None else {})}
        ok = not h.get("unhealthy")
        if lag is not None:
            age = None if lag.last_ok is None else round(now - lag.last_ok, 1)
            h["kafka_checked_s_ago"] = age
            # Kafka unanswered for a minute (after the start-up grace): unhealthy
            ok = ok and ((age is not None and age < 60) or now - started < startup_grace_s)
        h["ok"] = ok
        return h

    server = serve(args.metrics_port, args.metrics_host, health)
    if server is not None and brokers and lag_topic:
        lag = LagMonitor(brokers, lag_topic).start()
    ticker = StatusLogger(status, args.status_interval).start()
    log.info("%s starting%s", name, f"; metrics at {server.url}/metrics, health at {server.url}/healthz"
             if server is not None else "; metrics off", extra={"service": name,
                                                                "metrics_port": server.port if server else 0})
    try:
        yield server
    finally:
        ticker.stop()
        if lag is not None:
            lag.stop()
        log.info("%s stopped", name, extra={"service": name, **status()})
        if server is not None:
            server.close()
        own_metrics("flow")  # back to the set registered at import (commands run in one process)


def cmd_health(args: argparse.Namespace) -> int:
    import urllib.error
    import urllib.request

    url = args.url or f"http://{args.host}:{args.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as r:
            body = r.read().decode()
            code = r.status
    except urllib.error.HTTPError as e:
        body, code = e.read().decode(), e.code
    except (urllib.error.URLError, OSError) as e:
        print(f"unhealthy: {url} unreachable ({getattr(e, 'reason', e)})", file=sys.stderr)
        return 1
    sys.stdout.write(body if body.endswith("\n") else body + "\n")
    return 0 if code == 200 else 1


def register(subparsers: Any) -> None:
    """Add ``health`` to the ``newsflow`` command."""
    p = subparsers.add_parser(
        "health", help="ask a running run/poll for its health (exit 0 healthy, 1 not)",
        description="ask a running `newsflow run` or `newsflow poll` for /healthz and print its JSON answer;\n"
                    "exit 0 healthy, 1 unhealthy or unreachable (the health check of docker-compose.yml)",
        epilog=f"examples:\n  newsflow health                 # the flow on port {RUN_METRICS_PORT}\n"
               f"  newsflow health --port {POLL_METRICS_PORT}     # the poller",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=RUN_METRICS_PORT,
                   help=f"metrics port ({RUN_METRICS_PORT} run, {POLL_METRICS_PORT} poll)")
    p.add_argument("--url", help="full health URL instead of host and port")
    p.add_argument("--timeout", type=float, default=5.0)
    p.set_defaults(func=cmd_health)
