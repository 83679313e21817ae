"""newsflow: RSS/Atom feeds -> Kafka -> one Bytewax dataflow -> Kafka (dedup, stories, scores, digests).

Every command that runs the flow takes --config FILE (TOML) and NEWSFLOW_<SECTION>__<KEY>
environment variables; `newsflow config show` prints the effective configuration."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

#: modules that add their own sub-commands with ``register(subparsers)``
PLUGINS = ("newsflow.cli.poll", "newsflow.cli.digest", "newsflow.cli.replay", "newsflow.cli.tail",
           "newsflow.cli.ops", "newsflow.cli.profile", "newsflow.cli.snapshots", "newsflow.cli.serve")


class UserError(Exception):
    """A mistake in the command line or its inputs: one line on stderr, exit status 2."""


def check_input(path: str) -> None:
    """A raw-payload archive must exist and hold ``*.jsonl[.gz]`` files."""
    from newsflow.connectors.files import archive_files

    p = Path(path)
    if not p.exists():
        msg = f"input {path!r} not found"
        raise UserError(msg)
    try:
        archive_files(p)
    except FileNotFoundError:
        msg = f"input directory {path!r} holds no *.jsonl or *.jsonl.gz files"
        raise UserError(msg) from None


def output_dir(path: str | Path) -> Path:
    """``path`` as an output directory, created if missing: a path that cannot be one (under a
    regular file, no permission) is a user mistake, not a traceback."""
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        msg = f"cannot create output directory {str(out)!r}: {e.strerror or e}"
        raise UserError(msg) from None
    return out


def write_out(path: str, text: str) -> None:
    """Write an output file; a path that cannot be written is a user mistake, not a traceback."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        msg = f"cannot write {path!r}: {e.strerror or e}"
        raise UserError(msg) from None


#: ``--processes auto`` runs one process per core from this many bytes of raw payloads (the
#: archive's lines, uncompressed): on the 2-core machine of ``bench/``, two processes replayed
#: 20k UCI rows (15 MB) 1.19x as fast as one, the real archives of 58-75 MB 1.3-1.7x, and the
#: labelled real day (8 MB) no faster (1.02x: starting the second process costs what it saves)
AUTO_MIN_BYTES = 12_000_000


def auto_processes(archive_bytes: int, cores: int, partitions: int) -> int:
    """The processes ``--processes auto`` runs: one per core, at most one per input partition
    (parsing runs on at most that many workers), and one for an archive under
    :data:`AUTO_MIN_BYTES`.

    >>> auto_processes(58_000_000, 2, 4), auto_processes(58_000_000, 64, 4), auto_processes(8_200_000, 2, 4)
    (2, 4, 1)
    """
    if archive_bytes < AUTO_MIN_BYTES:
        return 1
    return max(1, min(cores, partitions))


def usable_cores() -> int:
    """The processors this process may run on (its affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def processes_of(args: argparse.Namespace, *, archive_bytes: int | None = None, partitions: int = 1) -> int:
    """``--processes``: a number (at least 1; default 1), or, where ``archive_bytes`` is given
    (``replay``), ``auto``: :func:`auto_processes` of those bytes, the usable cores and the
    input ``partitions``."""
    n = getattr(args, "processes", None)
    if n is None:
        return 1
    if n == "auto" and archive_bytes is not None:
        return auto_processes(archive_bytes, usable_cores(), partitions)
    try:
        k = int(n)
    except ValueError:
        msg = f"--processes must be a number >= 1{' or auto' if archive_bytes is not None else ''}, not {n!r}"
        raise UserError(msg) from None
    if k < 1:
        msg = f"--processes must be >= 1, not {n}"
        raise UserError(msg)
    return k


def workers_of(args: argparse.Namespace, settings: Any) -> int:
    """``--workers`` if given (it must be at least 1: 0 is a mistake, not "the default"),
    else ``flow.workers``."""
    if args.workers is None:
        return int(settings.flow.workers)
    if args.workers < 1:
        msg = f"--workers must be >= 1, not {args.workers}"
        raise UserError(msg)
    return int(args.workers)


def time_arg(value: str, flag: str) -> int:
    """An ISO 8601 time given on the command line -> epoch ms; a bad one names the flag."""
    from newsflow.core.timeutil import iso_to_ms

    try:
        return iso_to_ms(value)
    except (ValueError, TypeError):
        msg = f"{flag} {value!r} is not an ISO 8601 time (e.g. 2026-03-02T12:00:00Z)"
        raise UserError(msg) from None


def setting_default(path: str) -> str:
    """``"poller.heartbeat_s, 1"``: a setting and its default, read from :mod:`newsflow.config`
    so that ``--help`` cannot drift from the real default."""
    from newsflow.config import Settings

    value: Any = Settings()
    for part in path.split("."):
        value = getattr(value, part)
    return f"{path}, {value:g}" if isinstance(value, int | float) else f"{path}, {value}"


#: ``{setting:poller.heartbeat_s}`` in an option's help: that setting and its default
SETTING_IN_HELP = re.compile(r"\{setting:([a-z_.]+)\}")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written; ``{setting:KEY}`` in an option's help is expanded
    only when help is shown (importing the configuration costs half a second)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        return SETTING_IN_HELP.sub(lambda m: setting_default(m[1]), text) if text else text


def load_config(args: argparse.Namespace) -> Any:
    from newsflow.config import load_settings

    return load_settings(getattr(args, "config", None))


def brokers_of(args: argparse.Namespace, settings: Any) -> list[str]:
    """``--brokers`` if given, else ``kafka.brokers`` of the configuration."""
    if getattr(args, "brokers", None):
        return [b.strip() for b in args.brokers.split(",") if b.strip()]
    return list(settings.kafka.brokers)


def reachable_brokers(args: argparse.Namespace, settings: Any) -> list[str]:
    """The brokers, checked: an unreachable broker is one line within ``kafka.timeout_s``."""
    from newsflow.connectors.topics import check_brokers

    brokers = brokers_of(args, settings)
    check_brokers(brokers, args.broker_timeout if getattr(args, "broker_timeout", None) else settings.kafka.timeout_s)
    return brokers


def ensure_recovery_dir(recovery_dir: str | Path) -> Any:
    """A Bytewax ``RecoveryConfig`` on ``recovery_dir``, initialised on first use (an empty or
    missing directory, e.g. a fresh Docker volume, gets one recovery partition); an initialised
    one is resumed from."""
    from bytewax.recovery import RecoveryConfig, init_db_dir

    rd = Path(recovery_dir)
    if not any(rd.glob("part-*.sqlite3")):
        rd.mkdir(parents=True, exist_ok=True)
        init_db_dir(rd, 1)
    return RecoveryConfig(str(rd))


def run_file_flow(input_path: str, out_dir: str, settings: Any = None, workers: int = 1,
                  recovery_dir: str | None = None, interactions_path: str | None = None,
                  profiles: Any = None, processes: int = 1,
                  progress: Callable[[int, int], None] | None = None) -> tuple[int, int]:
    """Run the dataflow on a raw-payload archive, writing ``<out_dir>/<topic>.jsonl``; returns
    (raw payloads read, articles emitted).

    With ``recovery_dir`` (created on first use), state and input offsets are snapshotted, and a
    later run with the same directory resumes where the last one stopped. With ``processes`` > 1
    the flow runs on that many local processes (:mod:`newsflow.cli.processes`; the same output
    bytes; they share ``recovery_dir``), and ``progress`` is called with the running counts.
    """
    from newsflow.config import Settings

    settings = settings or Settings()
    if processes > 1:  # (the flow's modules are imported by the processes, not here)
        from newsflow.cli.processes import FileRun, run_processes

        rec = str(Path(recovery_dir).resolve()) if recovery_dir else None
        if rec:
            ensure_recovery_dir(rec)  # (initialised once, here: the processes share it)
        counts = run_processes(FileRun(input_path, out_dir, settings.model_dump_json().encode(), workers,
                                       interactions_path, profiles, rec),
                               processes, progress)
        create_topic_files(Path(out_dir), settings)
        return counts
    from datetime import timedelta

    from bytewax.testing import cluster_main, run_main

    from newsflow.flows import metrics
    from newsflow.flows.pipeline import file_flow

    p0, a0 = metrics.total(metrics.PAYLOADS), metrics.total(metrics.ARTICLES)
    recovery = ensure_recovery_dir(recovery_dir) if recovery_dir else None
    flow = file_flow(input_path, out_dir, settings, recovery=recovery is not None,
                     interactions_path=interactions_path, profiles=profiles, inflight_dir=recovery_dir)
    epoch = timedelta(seconds=settings.flow.epoch_seconds)
    if workers <= 1:
        run_main(flow, epoch_interval=epoch, recovery_config=recovery)
    else:
        cluster_main(flow, [], 0, worker_count_per_proc=workers, epoch_interval=epoch,
                     recovery_config=recovery)
    create_topic_files(Path(out_dir), settings)
    return int(metrics.total(metrics.PAYLOADS) - p0), int(metrics.total(metrics.ARTICLES) - a0)


#: the output topics of a file run, by role (the keys of :func:`summarize`)
OUTPUT_ROLES = ("articles", "digests", "feed-health", "deadletter", "stories")


def topic_files(settings: Any = None) -> dict[str, str]:
    """Role -> the file a file run writes it to: ``<topic name>.jsonl`` (``kafka.topics``)."""
    from newsflow.config import Settings

    t = (settings or Settings()).kafka.topics
    names = (t.articles, t.digests, t.feed_health, t.deadletter, t.stories)
    return {role: f"{name}.jsonl" for role, name in zip(OUTPUT_ROLES, names, strict=True)}


def create_topic_files(out_dir: Path, settings: Any = None) -> None:
    """Every topic file exists after a run, empty when the topic got no record (the file sink
    only opens the files it writes to), so scripts can rely on all of them."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in topic_files(settings).values():
        (out_dir / name).touch()


def summarize(out_dir: Path, settings: Any = None) -> dict[str, Any]:
    """Records per role (and dispositions, dead-letter reasons) in a file run's outputs."""
    counts: dict[str, Any] = {}
    for topic, name in topic_files(settings).items():
        n, seen = 0, Counter[str]()
        field, tally = _TALLIED.get(topic, (None, None))
        for line in jsonl_lines(out_dir / name):  # (streamed: 100k articles are 200 MB of JSON)
            n += 1
            if field is not None:
                seen[orjson.loads(line)[field]] += 1
        counts[topic] = n
        if tally is not None:
            counts[tally] = dict(sorted(seen.items()))
    return counts


#: role -> the record field :func:`summarize` tallies, and the name of the tally
_TALLIED = {"articles": ("disposition", "dispositions"), "deadletter": ("reason", "deadletter_reasons")}


def jsonl_lines(path: Path) -> Iterator[bytes]:
    """The non-empty lines of a JSONL file, one at a time (none when it does not exist)."""
    if not path.exists():
        return
    with path.open("rb") as f:
        for line in f:
            line = line.strip()
            if line:
                yield line


def not_an_archive(input_path: str, payloads: int, counts: dict[str, Any]) -> str | None:
    """The warning for a run in which not one line was a ``feeds.raw`` envelope (the wrong file,
    e.g. an articles dump): its lines are dead letters, and the user should hear about it."""
    if payloads or counts["articles"] or not counts["deadletter"]:
        return None
    reasons = ", ".join(counts["deadletter_reasons"])
    return (f"no line of {input_path} is a feeds.raw envelope: {counts['deadletter']} dead letters "
            f"({reasons}); is this an archive?")


def warn(msg: str) -> None:
    print(f"newsflow: warning: {msg}", file=sys.stderr)


def pick_demo_digest(digests: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The digest a person wants to see first: the fullest closed morning brief, else the
    fullest non-rolling digest, else the last one."""
    def has_articles(d: dict[str, Any]) -> bool:
        return d.get("article_count", 0) > 0

    for pred in (
        lambda d: d["digest_type"] == "morning_brief" and d.get("final") and has_articles(d),
        lambda d: d["digest_type"] != "rolling" and has_articles(d),
        lambda d: True,
    ):
        found = [d for d in digests if pred(d)]
        if found:
            return max(found, key=lambda d: (d.get("article_count", 0), d["window_start"]))
    return None


def cmd_demo(args: argparse.Namespace) -> int:
    from newsflow.connectors.files import write_archive
    from newsflow.samples.demo import demo_payloads

    settings = load_config(args)
    workers, processes = workers_of(args, settings), processes_of(args)
    if args.input:
        check_input(args.input)
    out = output_dir(args.out or tempfile.mkdtemp(prefix="newsflow-demo-"))
    if args.input:
        input_path = args.input
    else:
        input_path = str(out / "input" / "feeds.raw.jsonl")
        n = write_archive(demo_payloads(), input_path)
        print(f"demo sample: {n} raw payloads from 12 publishers -> {input_path}")
    t0 = time.perf_counter()
    # the configuration's [profiles] section: with profiles (or interactions), they learn
    profiles = settings.profiles.to_config() if settings.profiles.configured or args.interactions else None
    payloads, _ = run_file_flow(input_path, str(out), settings, workers=workers,
                                recovery_dir=args.recovery_dir, interactions_path=args.interactions,
                                profiles=profiles, processes=processes)
    dt = time.perf_counter() - t0
    files = topic_files(settings)
    digests = [orjson.loads(x) for x in jsonl_lines(out / files["digests"])]
    chosen = pick_demo_digest([d for d in digests if "profile" not in d])
    if chosen is not None:
        from newsflow.digest.render import to_html, to_markdown

        print(to_markdown(chosen))
        (out / "digest.html").write_text(to_html(chosen), encoding="utf-8")
    by_type = Counter(d["digest_type"] for d in digests)
    s = summarize(out, settings)
    print(f"\nflow finished in {dt:.2f}s; outputs in {out}/:")
    for topic, name in files.items():
        print(f"  {name:20s} {s[topic]:6d} records")
    print(f"  dispositions: {s['dispositions']}")
    print(f"  dead letters: {s['deadletter_reasons']}")
    print(f"  digests by type: {dict(sorted(by_type.items()))}")
    if chosen is not None:
        print(f"  the digest above as a web page: {out / 'digest.html'}")
    if digests:
        print(f"  render any digest: newsflow digest render {out / files['digests']} --format html --digest-id ID")
    problem = not_an_archive(input_path, payloads, s)
    if problem is not None:
        sys.stdout.flush()
        warn(problem)
        return 2
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from datetime import timedelta

    from bytewax.run import cli_main

    from newsflow.cli.ops import observed
    from newsflow.connectors.topics import ensure_topics
    from newsflow.flows.metrics import flow_status
    from newsflow.flows.pipeline import kafka_flow

    settings = load_config(args)
    workers = workers_of(args, settings)
    brokers = reachable_brokers(args, settings)
    ensure_topics(brokers, settings, partitions=args.partitions)
    recovery = ensure_recovery_dir(args.recovery_dir) if args.recovery_dir else None
    # with profiles configured, the interactions topic is the second input and profiles learn
    profiles = settings.profiles.to_config() if settings.profiles.configured else None
    flow = kafka_flow(brokers, settings, tail=not args.until_eof, recovery=recovery is not None,
                      inflight_dir=args.recovery_dir, profiles=profiles)
    resume = (f"a restart with --recovery-dir {args.recovery_dir} resumes from its last snapshot" if recovery
              else "without --recovery-dir a restart reads feeds.raw from the beginning")
    with observed("flow", args, flow_status, brokers=brokers, lag_topic=settings.kafka.topics.raw,
                  stop_note=resume):
        # (the configured epoch: without it Bytewax's default of 10 s applied, not flow.epoch_seconds)
        cli_main(flow, workers_per_process=workers, recovery_config=recovery,
                 epoch_interval=timedelta(seconds=settings.flow.epoch_seconds))
    return 0


def cmd_normalize(args: argparse.Namespace) -> int:
    from newsflow.dedup.story_decision import story_id_for
    from newsflow.feeds.normalize import normalize_payload
    from newsflow.model.records import DedupInfo, RawPayload, Sighting
    from newsflow.model.vocab import Disposition
    from newsflow.wire.codec import article_record, deadletter_to_dict

    out = sys.stdout.buffer
    for name in args.files:
        if not Path(name).is_file():
            msg = f"file {name!r} not found"
            raise UserError(msg)
    fetched_at = time_arg(args.fetched_at, "--fetched-at") if args.fetched_at else None
    for i, name in enumerate(args.files):
        body = Path(name).read_bytes()
        # the fetch time is the clock of every date rule (undated items, future-date gate): the
        # file's modification time (when it was saved) unless given
        fetched = fetched_at if fetched_at is not None else int(Path(name).stat().st_mtime * 1000)
        p = RawPayload(feed_id=Path(name).stem, url=args.base_url or Path(name).resolve().as_uri(),
                       fetched_at_ms=fetched, status=200, body=body)
        res = normalize_payload(p)
        for a in res.articles:
            info = DedupInfo(Disposition.UNIQUE, None, None, seen_in=(Sighting(a.feed_id, a.publisher, a.url or a.guid,
                                                                     a.fetched_at, a.article_id),))
            # one file alone: no dedup/story/topic state, so each article is its own story
            rec = article_record(a, info, f"file:{i:04d}:{a.item_index:05d}", {
                "story_id": story_id_for(a.article_id), "story_size": 1, "story_publishers": 1,
                "topic_id": "unassigned"})
            out.write(orjson.dumps(rec) + b"\n")
        for dl in res.deadletters:
            out.write(orjson.dumps(deadletter_to_dict(dl)) + b"\n")
        sys.stderr.write(f"{name}: {res.feed_format or '-'} status={res.status} articles={len(res.articles)} "
                         f"deadletters={len(res.deadletters)}{' bozo=' + res.bozo if res.bozo else ''}\n")
    return 0


def cmd_import_uci(args: argparse.Namespace) -> int:
    from newsflow.connectors.files import write_archive
    from newsflow.samples.uci import uci_payloads

    if not Path(args.file).is_file():
        msg = f"file {args.file!r} not found"
        raise UserError(msg)
    out = output_dir(args.out)
    n = write_archive(uci_payloads(args.file, args.limit), out / "uci.feeds.raw.jsonl.gz")
    print(f"wrote {n} raw payloads to {out / 'uci.feeds.raw.jsonl.gz'}")
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    from newsflow.connectors.files import Unreadable, archive_lines
    from newsflow.connectors.topics import (
        ensure_topics,
        produce_values,
        settings_config,
        silent_logger,
    )

    settings = load_config(args)
    check_input(args.input)
    brokers = reachable_brokers(args, settings)
    ensure_topics(brokers, settings, partitions=args.partitions)
    breaks: list[str] = []

    def lines() -> Iterator[bytes]:  # what can be read is produced; where a file broke off is said
        for x in archive_lines(args.input):
            if isinstance(x, Unreadable):
                breaks.append(x.detail)
            else:
                yield x

    # (librdkafka's retries stay quiet: a record it could not deliver is counted and reported)
    n = produce_values(brokers, settings.kafka.topics.raw, lines(),
                       add_config=settings_config(settings, {"logger": silent_logger()}))
    print(f"produced {n} raw payloads to {settings.kafka.topics.raw}")
    if breaks:
        msg = f"{'; '.join(breaks)} (the lines before it were produced)"
        raise UserError(msg)
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    from newsflow.config import load_with_sources, show

    settings, sources = load_with_sources(args.config)
    sys.stdout.write(show(settings, sources))
    return 0


def _examples(*lines: str) -> str:
    return "example" + ("s" if len(lines) > 1 else "") + ":\n" + "\n".join(f"  {x}" for x in lines)


def add_command(sub: Any, name: str, help: str, *examples: str) -> argparse.ArgumentParser:
    """A sub-command whose ``--help`` ends with examples."""
    return sub.add_parser(name, help=help, description=help, epilog=_examples(*examples),
                          formatter_class=HelpFormatter)


CONFIG_HELP = "configuration TOML (default: $NEWSFLOW_CONFIG; see `newsflow config show`)"
PARTITIONS_HELP = "partitions of topics created now (default: {setting:kafka.partitions})"
PROCESSES_HELP = ("local processes to run the flow on (default: 1); one per core is fastest, with the "
                  "same output (worker threads share one core)")


def add_kafka_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--brokers", help="Kafka bootstrap servers HOST:PORT[,HOST:PORT] (default: kafka.brokers)")
    p.add_argument("--broker-timeout", type=float, metavar="S",
                   help="give up on an unreachable broker after S seconds (default: {setting:kafka.timeout_s})")


def build_parser() -> argparse.ArgumentParser:
    from newsflow import __version__
    from newsflow.cli.ops import RUN_METRICS_PORT, add_observability_args

    ap = argparse.ArgumentParser(
        prog="newsflow", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_examples("newsflow demo", "newsflow run --brokers 127.0.0.1:9092 --config newsflow.toml",
                         "newsflow config show --config newsflow.toml", "newsflow <command> --help"))
    ap.add_argument("--version", action="version", version=f"newsflow {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    d = add_command(sub, "demo", "run the whole flow on the bundled sample or an archive (no Kafka needed)",
                    "newsflow demo --out /tmp/demo",
                    "newsflow demo --input feeds.raw.jsonl.gz --config newsflow.toml --out /tmp/replay")
    d.add_argument("--input", help="raw-payload archive (file or directory of *.jsonl[.gz]) instead of the sample")
    d.add_argument("--out", help="output directory (default: a new temp dir)")
    d.add_argument("--config", help=CONFIG_HELP)
    d.add_argument("--workers", type=int, help="workers (default: {setting:flow.workers})")
    d.add_argument("--processes", type=int, default=1, help=PROCESSES_HELP)
    d.add_argument("--recovery-dir", help="snapshot state here; a rerun with the same dir resumes")
    d.add_argument("--interactions", help="JSONL of interactions records: the configured profiles "
                                          "([profiles] of --config) learn from them")
    d.set_defaults(func=cmd_demo)
    r = add_command(sub, "run", "run the flow on Kafka: feeds.raw -> articles/digests/feed-health/deadletter",
                    "newsflow run --brokers 127.0.0.1:9092 --partitions 4 --config newsflow.toml",
                    "NEWSFLOW_DIGESTS__TZ=Europe/Berlin newsflow run --brokers kafka:9092 --until-eof")
    add_kafka_args(r)
    r.add_argument("--config", help=CONFIG_HELP)
    r.add_argument("--partitions", type=int, help=PARTITIONS_HELP)
    r.add_argument("--workers", type=int, help="worker threads (default: {setting:flow.workers})")
    r.add_argument("--recovery-dir", help="snapshot offsets and state here (initialised on first use); "
                                          "a restart with the same dir resumes instead of replaying")
    r.add_argument("--until-eof", action="store_true", help="stop at the end of the topic (replays, tests)")
    add_observability_args(r, RUN_METRICS_PORT)
    r.set_defaults(func=cmd_run)
    n = add_command(sub, "normalize", "parse raw feed files, print one JSON line per article or dead letter",
                    "newsflow normalize feed.xml --base-url https://example.com/feed.xml")
    n.add_argument("files", nargs="+")
    n.add_argument("--base-url", help="URL the feed was fetched from (resolves relative links)")
    n.add_argument("--fetched-at", help="fetch time, ISO 8601 (default: each file's modification time)")
    n.set_defaults(func=cmd_normalize)
    u = add_command(sub, "import-uci", "render UCI News Aggregator rows into raw feed payloads",
                    "newsflow import-uci uci-news.jsonl.gz --out /tmp/uci --limit 20000")
    u.add_argument("file")
    u.add_argument("--out", required=True)
    u.add_argument("--limit", type=int)
    u.set_defaults(func=cmd_import_uci)
    pr = add_command(sub, "produce", "produce a raw-payload archive to the feeds.raw topic",
                     "newsflow produce /tmp/uci/uci.feeds.raw.jsonl.gz --brokers 127.0.0.1:9092 --partitions 4")
    pr.add_argument("input")
    add_kafka_args(pr)
    pr.add_argument("--config", help=CONFIG_HELP)
    pr.add_argument("--partitions", type=int, help=PARTITIONS_HELP)
    pr.set_defaults(func=cmd_produce)
    c = add_command(sub, "config", "the configuration tree",
                    "newsflow config show", "NEWSFLOW_DEDUP__WINDOW_HOURS=48 newsflow config show --config newsflow.toml")
    cs = c.add_subparsers(dest="config_cmd", required=True, metavar="COMMAND")
    show = add_command(cs, "show", "print the effective configuration (TOML) with the source of each value",
                       "newsflow config show --config newsflow.toml")
    show.add_argument("--config", help=CONFIG_HELP)
    show.set_defaults(func=cmd_config_show)
    for mod in PLUGINS:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            continue
        m.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run one command; user mistakes (bad configuration, missing input, unreachable broker)
    are one line on stderr and exit status 2, never a traceback; a failed process of a
    ``--processes`` run is its output, one line and exit status 1."""
    args = build_parser().parse_args(argv)
    from newsflow.cli.processes import ProcessFailed
    from newsflow.config import ConfigError
    from newsflow.connectors.topics import BrokerUnreachableError

    try:
        return int(args.func(args) or 0)
    except (UserError, ConfigError, BrokerUnreachableError) as e:
        print(f"newsflow: error: {e}", file=sys.stderr)
        return 2
    except ProcessFailed as e:  # the failed process's output is already on stderr
        print(f"newsflow: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a Kafka failure (also wrapped by Bytewax): one line naming the cause
        from newsflow.connectors.kafka import kafka_error_line

        line = kafka_error_line(e)
        if line is None:
            raise
        print(f"newsflow: error: {line}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # python -m newsflow.cli.main: run the importable module, not a copy
    from newsflow.cli.main import main as _main

    sys.exit(_main())
