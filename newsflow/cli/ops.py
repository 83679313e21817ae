"""Operations: the metrics / health / log options of ``run`` and ``poll``, and ``newsflow health``.

``newsflow run`` serves ``http://<host>:9400/metrics`` and ``/healthz`` by default, ``newsflow
poll`` the same on port 9401 (``--metrics-port P``, 0 = off). ``newsflow health`` asks a running
one (exit 0 healthy, 1 unhealthy or unreachable): the health check of docker-compose.yml.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
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


class Stopped(KeyboardInterrupt):
    """SIGINT or SIGTERM asked the command to stop (``args[0]``: the signal's name)."""


def stop_signal(exc: BaseException, received: Sequence[str] = ()) -> str | None:
    """The name of the signal that stopped the command if ``exc`` (or anything in its cause
    chain: Bytewax wraps what its steps raise) is a stop, else None. Bytewax reports a signal
    that arrived while it ran Rust code as a ``BytewaxRuntimeError`` saying ``signal received``
    (``received``: the signals :func:`stop_on_signals` saw)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, Stopped):
            return str(cur.args[0]) if cur.args else "a signal"
        if isinstance(cur, KeyboardInterrupt):  # (raised by a handler of the command's own)
            return received[0] if received else "a signal"
        if "signal received" in str(cur):
            return received[0] if received else "a signal"
        cur = cur.__cause__ or cur.__context__
    return None


@contextmanager
def stop_on_signals() -> Iterator[list[str]]:
    """SIGINT and SIGTERM raise :class:`Stopped` (SIGTERM's default would end the process
    without a word); a second one is the default behaviour again. Yields the names of the
    signals received. Main thread only."""
    received: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    sigs = (signal.SIGINT, signal.SIGTERM)
    old = {s: signal.getsignal(s) for s in sigs}

    def handler(signum: int, _frame: object) -> None:
        for s in sigs:
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
        received.append(signal.Signals(signum).name)
        raise Stopped(received[-1])

    for s in sigs:
        signal.signal(s, handler)
    try:
        yield received
    finally:
        for s, h in old.items():
            signal.signal(s, h)


#: the lines of a Rust panic message on stderr: ``thread '<unnamed>' panicked at src/run.rs:
#: 133:25:``, the message, then ``note: run with `RUST_BACKTRACE=1` ...`` or ``stack backtrace:``
#: and its frames (``  12: name`` / ``             at file:line``)
_PANIC = re.compile(rb"^thread '.*' panicked at ")
_BACKTRACE = re.compile(rb"^stack backtrace:$")
_FRAME = re.compile(rb"^\s+(\d+: |at )")
_NOTE = re.compile(rb"^note: (run with `RUST_BACKTRACE|Some details are omitted)")
_MAX_PANIC_MESSAGE_LINES = 40


def _forward_without_panics(src: int, dst: int) -> None:
    # "message" (after "panicked at"), "frames" (after "stack backtrace:"), "end" (the blank
    # line Rust prints after a panic)
    mode = "pass"
    held = 0
    with os.fdopen(src, "rb") as f:
        for line in iter(f.readline, b""):
            body = line.rstrip(b"\r\n")
            if _PANIC.match(body):
                mode, held = "message", 0
                continue
            if mode == "message":
                held += 1
                if _BACKTRACE.match(body):
                    mode = "frames"
                    continue
                if _NOTE.match(body):
                    mode = "end"
                    continue
                if held <= _MAX_PANIC_MESSAGE_LINES and not body.startswith(b"Traceback "):
                    continue
                mode = "pass"  # not a panic's shape after all: let it through
            elif mode == "frames":
                if _FRAME.match(body):
                    continue
                mode = "pass"
                if _NOTE.match(body):
                    mode = "end"
                    continue
            elif mode == "end":
                mode = "pass"
                if not body:
                    continue
            try:
                os.write(dst, line)
            except OSError:  # stderr itself is gone: nothing left to forward to
                return


@contextmanager
def without_rust_panics() -> Iterator[None]:
    """Drop Bytewax's Rust panic messages from stderr (file descriptor 2, where Rust writes
    them before the Python exception arrives): a stop or a Kafka failure is then reported in
    one line, and any other error still by its Python traceback, which carries the cause.
    Everything else on stderr passes through unchanged, in order."""
    from newsflow.connectors.observability import set_terminal_stderr

    sys.stderr.flush()
    real = os.dup(2)
    r, w = os.pipe()
    os.dup2(w, 2)
    os.close(w)
    t = threading.Thread(target=_forward_without_panics, args=(r, real), name="newsflow-stderr", daemon=True)
    t.start()
    set_terminal_stderr(real)
    try:
        yield
    finally:
        set_terminal_stderr(None)
        sys.stderr.flush()
        os.dup2(real, 2)  # the pipe's last writer closes: the forwarder reads to the end
        t.join(5)
        if not t.is_alive():  # (a child process may still hold the pipe: then keep its target)
            os.close(real)


@contextmanager
def observed(name: str, args: argparse.Namespace, status: Callable[[], dict[str, Any]], *,
             brokers: Sequence[str] | None = None, lag_topic: str | None = None,
             startup_grace_s: float = 60.0, stop_note: str = "",
             health_extra: Callable[[], dict[str, Any]] | None = None) -> Iterator[Any]:
    """Logs, ``/metrics`` + ``/healthz`` and (with ``lag_topic``) consumer lag around a command;
    ``health_extra`` adds fields to ``/healthz`` only (an ``unhealthy`` reason makes it 503).

    SIGINT / SIGTERM stop it cleanly: the stop is one log line (``<name> stopped by SIGTERM;
    <stop_note>``) and the block ends without an exception; Bytewax's Rust panic messages are
    kept off stderr."""
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
    if brokers and lag_topic:  # (the status line reports the lag too, with or without /metrics)
        lag = LagMonitor(brokers, lag_topic).start()
    ticker = StatusLogger(status, args.status_interval).start()
    log.info("%s starting%s", name, f"; metrics at {server.url}/metrics, health at {server.url}/healthz"
             if server is not None else "; metrics off", extra={"service": name,
                                                                "metrics_port": server.port if server else 0})
    stopped_by: str | None = None
    failed = False
    received: list[str] = []
    try:
        with without_rust_panics(), stop_on_signals() as received:
            yield server
    except BaseException as e:
        stopped_by = stop_signal(e, received)
        if stopped_by is None:
            failed = True  # (the error is the caller's one line)
            raise
    finally:
        ticker.stop()
        if lag is not None:
            lag.stop()
        if not failed:
            log.info("%s stopped%s", name, f" by {stopped_by}{'; ' + stop_note if stop_note else ''}" if stopped_by else "",
                     extra={"service": name, "stopped_by": stopped_by, **status()})
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
