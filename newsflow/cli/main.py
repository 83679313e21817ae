"""The ``newsflow`` command."""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson

#: modules that add their own sub-commands with ``register(subparsers)``
PLUGINS = ("newsflow.cli.poll", "newsflow.cli.digest", "newsflow.cli.replay", "newsflow.cli.tail",
           "newsflow.cli.ops", "newsflow.cli.profile")


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
                  profiles: Any = None) -> None:
    """Run the dataflow on a raw-payload archive, writing ``<out_dir>/<topic>.jsonl``.

    With ``recovery_dir`` (created on first use), state and input offsets are snapshotted, and a
    later run with the same directory resumes where the last one stopped.
    """
    from datetime import timedelta

    from bytewax.testing import cluster_main, run_main

    from newsflow.flows.pipeline import file_flow

    recovery = ensure_recovery_dir(recovery_dir) if recovery_dir else None
    flow = file_flow(input_path, out_dir, settings, recovery=recovery is not None,
                     interactions_path=interactions_path, profiles=profiles, inflight_dir=recovery_dir)
    epoch = timedelta(seconds=5)
    if workers <= 1:
        run_main(flow, epoch_interval=epoch, recovery_config=recovery)
    else:
        cluster_main(flow, [], 0, worker_count_per_proc=workers, epoch_interval=epoch,
                     recovery_config=recovery)


def summarize(out_dir: Path) -> dict[str, Any]:
    counts: dict[str, Any] = {}
    for topic in ("articles", "digests", "feed-health", "deadletter"):
        f = out_dir / f"{topic}.jsonl"
        lines = f.read_bytes().splitlines() if f.exists() else []
        counts[topic] = len(lines)
        if topic == "articles":
            counts["dispositions"] = dict(sorted(Counter(orjson.loads(x)["disposition"] for x in lines).items()))
        if topic == "deadletter":
            counts["deadletter_reasons"] = dict(sorted(Counter(orjson.loads(x)["reason"] for x in lines).items()))
    return counts


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

    out = Path(args.out or tempfile.mkdtemp(prefix="newsflow-demo-"))
    out.mkdir(parents=True, exist_ok=True)
    if args.input:
        input_path = args.input
    else:
        input_path = str(out / "input" / "feeds.raw.jsonl")
        n = write_archive(demo_payloads(), input_path)
        print(f"demo sample: {n} raw payloads from 12 publishers -> {input_path}")
    t0 = time.perf_counter()
    profiles = None
    if args.interactions or args.profiles:
        from newsflow.profiles.config import load_profiles

        profiles = load_profiles(args.profiles)
    run_file_flow(input_path, str(out), workers=args.workers, recovery_dir=args.recovery_dir,
                  interactions_path=args.interactions, profiles=profiles)
    dt = time.perf_counter() - t0
    dfile = out / "digests.jsonl"  # absent when the input had no valid payload at all
    digests = [orjson.loads(x) for x in dfile.read_bytes().splitlines()] if dfile.exists() else []
    chosen = pick_demo_digest([d for d in digests if "profile" not in d])
    if chosen is not None:
        from newsflow.digest.render import to_html, to_markdown

        print(to_markdown(chosen))
        (out / "digest.html").write_text(to_html(chosen), encoding="utf-8")
    by_type = Counter(d["digest_type"] for d in digests)
    s = summarize(out)
    print(f"\nflow finished in {dt:.2f}s; outputs in {out}/:")
    for topic in ("articles", "digests", "feed-health", "deadletter"):
        print(f"  {topic + '.jsonl':20s} {s[topic]:6d} records")
    print(f"  dispositions: {s['dispositions']}")
    print(f"  dead letters: {s['deadletter_reasons']}")
    print(f"  digests by type: {dict(sorted(by_type.items()))}")
    if chosen is not None:
        print(f"  the digest above as a web page: {out / 'digest.html'}")
    print(f"  render any digest: newsflow digest render {out / 'digests.jsonl'} --format html --digest-id ID")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from bytewax._bytewax import cli_main

    from newsflow.cli.ops import observed
    from newsflow.config import load_settings
    from newsflow.connectors.topics import ensure_topics
    from newsflow.flows.metrics import flow_status
    from newsflow.flows.pipeline import kafka_flow

    settings = load_settings(args.config)
    brokers = args.brokers.split(",")
    ensure_topics(brokers, settings)
    recovery = ensure_recovery_dir(args.recovery_dir) if args.recovery_dir else None
    flow = kafka_flow(brokers, settings, tail=not args.until_eof, recovery=recovery is not None,
                      inflight_dir=args.recovery_dir)
    with observed("flow", args, flow_status, brokers=brokers, lag_topic=settings.topics.raw):
        cli_main(flow, workers_per_process=args.workers, recovery_config=recovery)
    return 0


def cmd_normalize(args: argparse.Namespace) -> int:
    from newsflow.core.timeutil import iso_to_ms
    from newsflow.dedup.stories import story_id_for
    from newsflow.feeds.normalize import normalize_payload
    from newsflow.model.records import DedupInfo, RawPayload, Sighting
    from newsflow.wire.codec import article_record, deadletter_to_dict

    out = sys.stdout.buffer
    for i, name in enumerate(args.files):
        body = Path(name).read_bytes()
        # the fetch time is the clock of every date rule (undated items, future-date gate): the
        # file's modification time (when it was saved) unless given
        fetched = iso_to_ms(args.fetched_at) if args.fetched_at else int(Path(name).stat().st_mtime * 1000)
        p = RawPayload(feed_id=Path(name).stem, url=args.base_url or Path(name).resolve().as_uri(),
                       fetched_at_ms=fetched, status=200, body=body)
        res = normalize_payload(p)
        for a in res.articles:
            info = DedupInfo("unique", None, None, seen_in=(Sighting(a.feed_id, a.publisher, a.url or a.guid,
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

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n = write_archive(uci_payloads(args.file, args.limit), out / "uci.feeds.raw.jsonl.gz")
    print(f"wrote {n} raw payloads to {out / 'uci.feeds.raw.jsonl.gz'}")
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    from newsflow.config import load_settings
    from newsflow.connectors.files import iter_archive
    from newsflow.connectors.topics import ensure_topics, produce_values

    settings = load_settings(args.config)
    brokers = args.brokers.split(",")
    ensure_topics(brokers, settings, partitions=args.partitions)
    n = produce_values(brokers, settings.topics.raw, iter_archive(args.input))
    print(f"produced {n} raw payloads to {settings.topics.raw}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from newsflow.cli.ops import RUN_METRICS_PORT, add_observability_args

    ap = argparse.ArgumentParser(prog="newsflow", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="run the whole flow on the bundled sample (no Kafka needed)")
    d.add_argument("--input", help="raw-payload archive (file or directory of *.jsonl[.gz]) instead of the sample")
    d.add_argument("--out", help="output directory (default: a new temp dir)")
    d.add_argument("--workers", type=int, default=1)
    d.add_argument("--recovery-dir", help="snapshot state here; a rerun with the same dir resumes")
    d.add_argument("--interactions", help="JSONL of interactions records: profiles learn from them")
    d.add_argument("--profiles", help="TOML with a [profiles] table (named profiles, their digests)")
    d.set_defaults(func=cmd_demo)
    r = sub.add_parser("run", help="run the flow on Kafka: feeds.raw -> articles/digests/feed-health/deadletter")
    r.add_argument("--brokers", required=True)
    r.add_argument("--config", help="settings TOML")
    r.add_argument("--workers", type=int, default=1)
    r.add_argument("--recovery-dir", help="snapshot offsets and state here (initialised on first use); "
                                          "a restart with the same dir resumes instead of replaying")
    r.add_argument("--until-eof", action="store_true", help="stop at the end of the topic (replays, tests)")
    add_observability_args(r, RUN_METRICS_PORT)
    r.set_defaults(func=cmd_run)
    n = sub.add_parser("normalize", help="parse raw feed files, print one JSON line per article or dead letter")
    n.add_argument("files", nargs="+")
    n.add_argument("--base-url", help="URL the feed was fetched from (resolves relative links)")
    n.add_argument("--fetched-at", help="fetch time, ISO 8601 (default: each file's modification time)")
    n.set_defaults(func=cmd_normalize)
    u = sub.add_parser("import-uci", help="render UCI News Aggregator rows into raw feed payloads")
    u.add_argument("file")
    u.add_argument("--out", required=True)
    u.add_argument("--limit", type=int)
    u.set_defaults(func=cmd_import_uci)
    pr = sub.add_parser("produce", help="produce a raw-payload archive to the feeds.raw topic")
    pr.add_argument("input")
    pr.add_argument("--brokers", required=True)
    pr.add_argument("--config")
    pr.add_argument("--partitions", type=int, default=1)
    pr.set_defaults(func=cmd_produce)
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
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
