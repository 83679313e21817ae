"""``newsflow serve``: the live desk (``docs/desk.md``), a web page of the current stories,
digests and feed health, from a replay's output directory (``--from DIR``) or from a running
deployment's topics (``--brokers HOST:PORT``)."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any

TOKEN_ENV = "NEWSFLOW_SERVE_TOKEN"
DEFAULT_PORT = 8400


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the desk on this machine.

    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("::1"), is_loopback("0.0.0.0")
    (True, True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from newsflow.cli.main import UserError, load_config, reachable_brokers
    from newsflow.serve.app import create_app
    from newsflow.serve.sources import KafkaFeed, load_dir, missing_files
    from newsflow.serve.store import Store

    token = args.token or os.environ.get(TOKEN_ENV) or None
    if not is_loopback(args.host) and not token:
        msg = f"--host {args.host} is not loopback: give --token (or {TOKEN_ENV}) so only its holders see the desk"
        raise UserError(msg)
    settings = load_config(args)
    store = Store()
    feed: KafkaFeed | None = None
    if args.from_dir:
        out = Path(args.from_dir)
        if not out.is_dir():
            msg = f"--from {args.from_dir!r} is not a directory"
            raise UserError(msg)
        missing = missing_files(out, settings)
        if len(missing) == 4:
            msg = f"--from {args.from_dir!r} holds none of {', '.join(missing)} (a `newsflow demo --out DIR` output)"
            raise UserError(msg)
        n = load_dir(store, out, settings)
        source = str(out)
        print(f"read {n} records from {out}", file=sys.stderr)
    else:
        brokers = reachable_brokers(args, settings)
        source = ",".join(brokers)
        feed = KafkaFeed(store, brokers, settings,
                         on_error=lambda line: print(f"newsflow: warning: {line}", file=sys.stderr)).start()
    app = create_app(store, token=token, source=source, lag_ms=(lambda: feed.lag_ms) if feed else lambda: None)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"newsflow desk on http://{shown}:{args.port}/ (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    finally:
        if feed is not None:
            feed.stop()
    return 0


def register(subparsers: Any) -> None:
    """Add ``serve`` to the ``newsflow`` command."""
    from newsflow.cli.main import CONFIG_HELP, add_command

    p = add_command(subparsers, "serve", "the live desk: a web page of the current stories, digests and feed health",
                    "newsflow serve --from /tmp/demo --port 8400",
                    "newsflow serve --brokers 127.0.0.1:9092 --port 8400",
                    f"{TOKEN_ENV}=s3cret newsflow serve --brokers kafka:9092 --host 0.0.0.0")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from", dest="from_dir", metavar="DIR",
                     help="a replay's output directory (`newsflow demo --out DIR`)")
    src.add_argument("--brokers", help="a running deployment's Kafka HOST:PORT[,HOST:PORT]: its topics, "
                                       "from their start, followed live")
    p.add_argument("--broker-timeout", type=float, metavar="S",
                   help="give up on an unreachable broker after S seconds (default: {setting:kafka.timeout_s})")
    p.add_argument("--config", help=CONFIG_HELP + "; the topic names")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1); any other "
                                                       "than loopback requires --token")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--token", help=f"a secret every request must carry (default: ${TOKEN_ENV}); open "
                                   "http://HOST:PORT/?token=SECRET once, the browser keeps it in a cookie")
    p.set_defaults(func=cmd_serve)
