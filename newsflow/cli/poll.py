"""``newsflow poll`` and ``newsflow feeds ...`` sub-commands (added by :func:`register`).

::

    newsflow poll --registry feeds.toml --brokers 127.0.0.1:9092          # continuous
    newsflow poll --registry feeds.toml --brokers 127.0.0.1:9092 --once   # one round (cron)
    newsflow feeds import-opml subscriptions.opml --registry feeds.toml   # merge into registry
    newsflow feeds export-opml --registry feeds.toml > feeds.opml
    newsflow feeds check --registry feeds.toml

Per-feed state (ETag, Last-Modified, adopted URL, interval, next poll, counters) persists in
``--state-dir`` (default ``<registry dir>/.newsflow-state/<registry name>``) as Bytewax
recovery files, so ``--once`` from cron respects each feed's schedule between runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from newsflow.model.vocab import FAILED_POLL_STATUSES, SUCCESS_STATUSES, HealthStatus
from newsflow.polling.registry import (
    Registry,
    RegistryError,
    check,
    dump_registry,
    export_opml,
    import_opml,
    load_registry,
    merge_feeds,
    valid_feeds,
)

DEFAULT_REGISTRY = "feeds.toml"


def default_state_dir(registry: str | Path) -> Path:
    p = Path(registry).resolve()
    return p.parent / ".newsflow-state" / p.stem


class Progress:
    """Counts poll events; on a terminal keeps one status line up to date."""

    def __init__(self, total: int | None, out: TextIO | None = None, *, live: bool | None = None,
                 min_interval_s: float = 0.2) -> None:
        self.total = total
        self.out = out if out is not None else sys.stdout  # looked up now, not at import
        self.live = self.out.isatty() if live is None else live
        self.counts: Counter[str] = Counter()
        self.alerts: list[str] = []
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._min = min_interval_s
        self._drawn = False  # the status line is on the terminal now
        self._lock = threading.RLock()  # log lines come from other threads too

    @property
    def polled(self) -> int:
        return sum(n for s, n in self.counts.items() if s != "tick")

    def __call__(self, ev: Any) -> None:
        with self._lock:
            self.counts[ev.status] += 1
            if ev.alert:
                self.alerts.append(f"{ev.feed_id}: {ev.alert}")
                if self.live:
                    self.out.write(f"\r\x1b[K! {ev.feed_id}: {ev.alert}\n")
                    self._drawn = False
            if self.live:
                now = time.monotonic()
                if now - self._last_draw >= self._min or (self.total and self.polled >= self.total):
                    self._last_draw = now
                    self.out.write("\r\x1b[K" + self.line())
                    self.out.flush()
                    self._drawn = True

    def share_terminal(self, *loggers: logging.Logger) -> None:
        """On a terminal, each log line of ``loggers``' handlers first clears the status line,
        which is drawn again below it: a log line and the status line never share a line."""
        if not self.live:
            return
        for lg in loggers:
            for h in lg.handlers:
                if getattr(h, "_newsflow_progress", None) is self:
                    continue
                h.emit = self._around(h.emit)  # type: ignore[method-assign,assignment]
                h._newsflow_progress = self  # type: ignore[attr-defined]

    def _around(self, emit: Callable[[logging.LogRecord], None]) -> Callable[[logging.LogRecord], None]:
        def wrapped(record: logging.LogRecord) -> None:
            with self._lock:
                if self._drawn:
                    self.out.write("\r\x1b[K")
                    self.out.flush()
                emit(record)
                if self._drawn:
                    self.out.write(self.line())
                    self.out.flush()
        return wrapped

    def line(self) -> str:
        c = self.counts
        n = self.polled
        rate = n / max(time.monotonic() - self.started, 1e-9)
        ok = sum(c[s] for s in SUCCESS_STATUSES if s != HealthStatus.NOT_MODIFIED)
        errors = sum(c[s] for s in FAILED_POLL_STATUSES)
        of = f"/{self.total}" if self.total else ""
        return (f"polled {n}{of}  new/changed {ok}  not modified {c['not_modified']}  "
                f"errors {errors}  ticks {c['tick']}  {rate:.1f} polls/s")

    def finish(self) -> None:
        if self.live:
            self.out.write("\r\x1b[K")
            self._drawn = False
        self.out.write(self.line() + "\n")
        statuses = ", ".join(f"{s} {n}" for s, n in sorted(self.counts.items()) if s != "tick")
        if statuses:
            self.out.write(f"statuses: {statuses}\n")
        if self.alerts and not self.live:
            for a in self.alerts:
                self.out.write(f"! {a}\n")
        self.out.flush()


def _registry(path: str) -> Registry | None:
    """The feed registry at ``path``, or ``None`` after saying why on stderr."""
    try:
        return load_registry(path)
    except RegistryError as e:
        print(f"error: {e}", file=sys.stderr)
        return None


def cmd_poll(args: argparse.Namespace) -> int:
    from newsflow.cli.main import load_config, reachable_brokers
    from newsflow.cli.ops import observed
    from newsflow.connectors.poller.config import poller_config
    from newsflow.connectors.topics import settings_config
    from newsflow.flows.metrics import PollMetrics, poll_status
    from newsflow.flows.poller import run_poller_flow

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    registry = _registry(args.registry)
    if registry is None:
        return 2
    settings = load_config(args)
    cfg = poller_config(settings)
    fetch = cfg.fetch
    if args.allow_private:
        fetch = replace(fetch, allow_private=True)
    if args.timeout is not None:
        fetch = replace(fetch, timeout_s=args.timeout)
    cfg = replace(cfg, fetch=fetch)
    feeds, problems = valid_feeds(registry, min_interval_s=cfg.policy.min_interval_s,
                                  allow_private=fetch.allow_private,
                                  allowed_networks=fetch.allowed_networks)
    for p in problems:
        print(p, file=sys.stderr)
    if not feeds:
        print("error: no valid feeds in the registry", file=sys.stderr)
        return 2
    from newsflow.connectors.poller.state_dir import (
        StateDirLocked,
        request_poll_now,
        state_dir_owner,
    )

    own_state = Path(args.state_dir or default_state_dir(args.registry))
    owner = None if args.no_state else state_dir_owner(own_state)
    if args.now is not None:  # ask the running poller, do not poll here
        if args.now not in {f.id for f in feeds}:
            print(f"error: no valid feed {args.now!r} in {args.registry}", file=sys.stderr)
            return 2
        if owner is None:
            print(f"error: no poller is running on {own_state}; `newsflow poll --once --force` polls "
                  "every feed now", file=sys.stderr)
            return 2
        request_poll_now(own_state, args.now)
        print(f"asked the poller (pid {owner}) to poll {args.now} now")
        return 0
    if owner is not None:
        print(f"error: {StateDirLocked(own_state, owner)}", file=sys.stderr)
        return 2
    if args.concurrency is not None:
        cfg = replace(cfg, concurrency=args.concurrency)
    if args.heartbeat is not None:
        cfg = replace(cfg, heartbeat_s=args.heartbeat)
    state_dir = None if args.no_state else own_state
    if state_dir is not None and cfg.blob_dir is None:
        cfg = replace(cfg, blob_dir=str(state_dir / "blobs"))
    brokers = reachable_brokers(args, settings)
    if not args.no_create_topics:
        from newsflow.connectors.topics import ensure_topics

        ensure_topics(brokers, settings)
    progress = None if args.quiet else Progress(len(feeds) if args.once else None)
    poll_metrics = PollMetrics(SUCCESS_STATUSES)

    def observe(ev: Any) -> None:
        poll_metrics(ev)
        if progress is not None:
            progress(ev)

    from newsflow.connectors.poller.sink import DELIVERY

    # Ctrl-C / SIGTERM: the poller finishes its epoch and snapshots; one line says so, exit 0
    try:
        with observed("poller", args, poll_status,
                      stop_note=f"per-feed state saved in {state_dir}" if state_dir is not None else "",
                      health_extra=lambda: {**poll_metrics.broken(), **DELIVERY.health()}):
            if progress is not None:
                progress.share_terminal(logging.getLogger("newsflow"), logging.getLogger())
            run_poller_flow(feeds, cfg, brokers, state_dir=state_dir, once=args.once, force=args.force,
                            progress=observe, snapshot_s=args.snapshot_interval,
                            producer_config=settings_config(settings))
    except StateDirLocked as e:  # another one started since the check above
        print(f"error: {e}", file=sys.stderr)
        return 2
    if progress is not None:
        progress.finish()
    return 0


def cmd_import_opml(args: argparse.Namespace) -> int:
    try:
        text = Path(args.file).read_bytes()
        existing = load_registry(args.registry).feeds if args.registry and Path(args.registry).exists() else ()
        rejected: list[tuple[str, str]] = []
        new = import_opml(text, default_tier=args.tier, default_language=args.language,
                          existing_ids=[f.id for f in existing], rejected=rejected)
    except (OSError, RegistryError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for url, why in rejected:
        print(f"skipped {url}: {why}", file=sys.stderr)
    if not args.registry:
        sys.stdout.write(dump_registry(new, header=f"imported from {Path(args.file).name}"))
        return 0
    from newsflow.cli.main import write_out

    merged, added = merge_feeds(list(existing), new)
    fresh = merged[len(existing):]
    path = Path(args.registry)
    if path.exists():  # append: the user's [defaults], comments and order stay as they are
        old = path.read_text(encoding="utf-8")
        sep = "" if old.endswith("\n") or not old else "\n"
        block = dump_registry(fresh, header=f"imported from {Path(args.file).name}") if fresh else ""
        write_out(str(path), old + sep + ("\n" + block if block else ""))
    else:
        write_out(str(path), dump_registry(merged, header="newsflow feed registry"))
    print(f"{added} feeds added, {len(new) - added} already present, {len(rejected)} refused -> {args.registry}")
    return 0


def cmd_export_opml(args: argparse.Namespace) -> int:
    registry = _registry(args.registry)
    if registry is None:
        return 2
    text = export_opml(registry.feeds)
    if args.output:
        from newsflow.cli.main import write_out

        write_out(args.output, text)  # a path that cannot be written: one line, exit 2
    else:
        sys.stdout.write(text)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    registry = _registry(args.registry)
    if registry is None:
        return 2
    problems = check(registry)
    for p in problems:
        print(p)
    errors = sum(p.level == "error" for p in problems)
    warnings = len(problems) - errors
    print(f"{len(registry.feeds)} feeds, {errors} errors, {warnings} warnings")
    return 1 if errors else 0


def register(subparsers: Any) -> None:
    """Add ``poll`` and ``feeds`` to the ``newsflow`` command."""
    from newsflow.cli.main import CONFIG_HELP, add_command, add_kafka_args
    from newsflow.cli.ops import POLL_METRICS_PORT, add_observability_args

    p = add_command(subparsers, "poll", "poll the registry's feeds into feeds.raw and feed-health",
                    "newsflow poll --registry config/feeds.toml --brokers 127.0.0.1:9092",
                    "newsflow poll --registry feeds.toml --once --config newsflow.toml   # one round (cron)")
    p.add_argument("--registry", default=DEFAULT_REGISTRY, help="registry TOML (default feeds.toml)")
    add_kafka_args(p)
    p.add_argument("--once", action="store_true", help="one round of due feeds, then exit (cron)")
    p.add_argument("--now", metavar="FEED_ID",
                   help="ask the poller running on this state directory to poll FEED_ID now, then exit")
    p.add_argument("--force", action="store_true", help="with --once: poll all feeds, ignore schedules")
    p.add_argument("--allow-private", action="store_true",
                   help="allow private and loopback addresses (never link-local/metadata)")
    p.add_argument("--config", help=CONFIG_HELP + "; the poller reads [poller], [poller.fetch], [poller.policy], [kafka]")
    p.add_argument("--state-dir", help="per-feed state (default <registry dir>/.newsflow-state/<name>)")
    p.add_argument("--no-state", action="store_true", help="do not persist per-feed state")
    p.add_argument("--snapshot-interval", type=float, default=5.0,
                   help="seconds between state snapshots (polls after the last one are redone "
                        "after a crash or Ctrl-C; default 5)")
    # {setting:KEY}: the help shows the setting's real default (newsflow.cli.main.HelpFormatter)
    p.add_argument("--concurrency", type=int, help="concurrent fetches (default: {setting:poller.concurrency})")
    p.add_argument("--timeout", type=float, help="seconds per fetch attempt (default: {setting:poller.fetch.timeout_s})")
    p.add_argument("--heartbeat", type=float,
                   help="seconds between heartbeat ticks, 0: off (default: {setting:poller.heartbeat_s})")
    p.add_argument("--no-create-topics", action="store_true", help="do not create missing topics")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    add_observability_args(p, POLL_METRICS_PORT)
    p.set_defaults(func=cmd_poll)

    f = add_command(subparsers, "feeds", "feed registry: import/export OPML, check",
                    "newsflow feeds check --registry config/feeds.toml")
    fs = f.add_subparsers(dest="feeds_cmd", required=True)
    imp = add_command(fs, "import-opml", "import an OPML subscription list",
                      "newsflow feeds import-opml subscriptions.opml --registry feeds.toml --tier T3")
    imp.add_argument("file")
    imp.add_argument("--registry", help="merge into this registry (created if missing); "
                                        "default: print TOML to stdout")
    imp.add_argument("--tier", default=None, choices=("T1", "T2", "T3", "T4", "T5"),
                     help="tier of imported feeds without one (default: none, the source tier table decides)")
    imp.add_argument("--language", help="language of imported feeds without one")
    imp.set_defaults(func=cmd_import_opml)
    exp = add_command(fs, "export-opml", "write the registry as OPML",
                      "newsflow feeds export-opml --registry feeds.toml -o feeds.opml")
    exp.add_argument("--registry", default=DEFAULT_REGISTRY)
    exp.add_argument("-o", "--output", help="file (default stdout)")
    exp.set_defaults(func=cmd_export_opml)
    chk = add_command(fs, "check", "validate the registry (exit 1 on errors)",
                      "newsflow feeds check --registry config/feeds.toml")
    chk.add_argument("--registry", default=DEFAULT_REGISTRY)
    chk.set_defaults(func=cmd_check)
