"""``newsflow replay ARCHIVE [--config C] [--out DIR] [--compare C2] [--processes N]``: backtests.

Replays a raw-payload archive (a ``feeds.raw`` dump: file or directory of ``*.jsonl[.gz]``)
through the whole flow with one configuration, with a progress bar (payloads, articles/s, ETA)
on stderr, and writes ``<out>/<topic>.jsonl``. With ``--compare C2`` it replays the same archive
a second time with configuration C2 and writes what changes between the two:

    <out>/a/<topic>.jsonl      outputs with --config C (or the defaults)
    <out>/b/<topic>.jsonl      outputs with --compare C2
    <out>/compare.md           the comparison (newsflow.replay.compare, rendered by .report)
    <out>/compare.html         the same as a standalone web page (contents, charts, no script)

Examples::

    newsflow replay feeds.raw.jsonl.gz --out /tmp/bt
    newsflow replay feeds.raw.jsonl.gz --config base.toml --compare short-window.toml --out /tmp/bt

Replays run on event time only, so the same archive and configuration always give the same
records and the same report, byte for byte.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson


def help_text(doc: str) -> str:
    """``--help``'s description: the docstring after its first line, all of it (argparse would
    get a paragraph cut before its list) but its examples (the epilog) and reST quoting."""
    paras = doc.strip().split("\n\n")[1:]
    if "Examples::" in paras:  # the heading and its indented block
        i = paras.index("Examples::")
        paras = paras[:i] + paras[i + 2:]
    return "\n\n".join(paras).replace("``", "")


EPILOG = """examples:
  newsflow replay feeds.raw.jsonl.gz --out /tmp/bt
  newsflow replay feeds.raw.jsonl.gz --config base.toml --compare other.toml --out /tmp/bt
"""


@dataclass(frozen=True, slots=True)
class RunStats:
    payloads: int
    articles: int
    seconds: float

    @property
    def articles_per_s(self) -> float:
        return self.articles / self.seconds if self.seconds > 0 else 0.0


def count_payloads(archive: str) -> tuple[int, int]:
    """The archive's lines and their bytes, for the progress bar and ``--processes auto``
    (where a file breaks off, the flow itself reads what it can and dead-letters the break)."""
    from newsflow.connectors.files import Unreadable, archive_lines

    n = size = 0
    for x in archive_lines(archive):
        if not isinstance(x, Unreadable):
            n += 1
            size += len(x)
    return n, size


def replay_once(archive: str, out_dir: Path, settings: Any, *, workers: int = 1, total: int | None = None,
                label: str = "replay", progress: bool = True, processes: int = 1) -> RunStats:
    """One replay with a live progress bar fed from the flow's own counters (payloads parsed,
    articles emitted), read by a background thread (with ``processes`` > 1: the counters the
    processes report): the flow itself is untouched."""
    from newsflow.cli.main import run_file_flow

    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    stop = threading.Event()
    bar = None
    show: Callable[[int, int], None] | None = None
    if progress:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn("payloads  {task.fields[articles]} articles  {task.fields[rate]} articles/s"),
                       TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                       console=Console(stderr=True), transient=False)
        task = bar.add_task(label, total=total, articles=0, rate="0.0")

        def show(payloads: int, arts: int) -> None:
            dt = time.perf_counter() - t0
            bar.update(task, completed=payloads, articles=arts, rate=f"{arts / dt:.1f}" if dt > 0 else "0.0")

        bar.start()
        if processes <= 1:  # the flow runs here: its own counters, read by a background thread
            from newsflow.flows import metrics

            p0, a0 = metrics.total(metrics.PAYLOADS), metrics.total(metrics.ARTICLES)

            def watch() -> None:
                while not stop.wait(0.25):
                    show(int(metrics.total(metrics.PAYLOADS) - p0), int(metrics.total(metrics.ARTICLES) - a0))

            threading.Thread(target=watch, name="replay-progress", daemon=True).start()
    try:
        payloads, arts = run_file_flow(archive, str(out_dir), settings, workers=workers, processes=processes,
                                       progress=show if processes > 1 else None)
        if show is not None:  # the final counts, whenever the last reading was
            show(payloads, arts)
    finally:
        stop.set()
        if bar is not None:
            bar.stop()
    return RunStats(payloads, arts, time.perf_counter() - t0)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def load_run(label: str, out_dir: Path, settings: Any = None) -> Any:
    """A run's outputs for the comparison: its articles and digests, and per topic the records
    written and their distinct keys (``newsflow.wire.contracts.ROLE_RECORD_FIELDS``)."""
    from newsflow.cli.main import topic_files
    from newsflow.config import Settings
    from newsflow.replay.compare import TopicCount, run_outputs
    from newsflow.wire.contracts import ROLE_RECORD_FIELDS

    settings = settings or Settings()
    files = topic_files(settings)
    records = {role: read_jsonl(out_dir / name) for role, name in files.items()}
    topics = []
    for role, recs in records.items():
        key = ROLE_RECORD_FIELDS[role.replace("-", "_")][0]
        topics.append(TopicCount(role, len(recs), len({orjson.dumps(r.get(key)) for r in recs})))
    return run_outputs(label, records["articles"], records["digests"], deadletters=len(records["deadletter"]),
                       topics=topics, top_threshold=settings.digests.top_threshold,
                       min_importance=settings.digests.min_importance)


def labels_for(config_a: str | None, config_b: str) -> tuple[str, str]:
    a = Path(config_a).stem if config_a else "defaults"
    b = Path(config_b).stem
    if a == b:
        a, b = f"A:{a}", f"B:{b}"
    return a, b


def write_report(out: Path, run_a: Any, run_b: Any, extra: dict[str, str]) -> tuple[Path, Path]:
    from dataclasses import replace

    from newsflow.replay.compare import compare
    from newsflow.replay.report import to_html, to_markdown

    c = replace(compare(run_a, run_b), extra=extra)
    md, page = out / "compare.md", out / "compare.html"
    md.write_text(to_markdown(c), encoding="utf-8")
    page.write_text(to_html(c), encoding="utf-8")
    return md, page


def _summary(label: str, st: RunStats, out_dir: Path, settings: Any, archive: str,
             processes: int = 1) -> tuple[str, str | None]:
    """The run's summary line, and the warning when not one line of the archive was a payload."""
    from newsflow.cli.main import jsonl_lines, not_an_archive, summarize, topic_files

    s = summarize(out_dir, settings)
    keys = len({orjson.loads(x).get("key") for x in jsonl_lines(out_dir / topic_files(settings)["articles"])})
    line = (f"{label}: {st.payloads} payloads, {s['articles']} article records ({keys} distinct), "
            f"{s['digests']} digests, "
            f"{s['deadletter']} dead letters in {st.seconds:.1f}s"
            f"{f' on {processes} processes' if processes > 1 else ''} ({st.articles_per_s:.0f} articles/s) "
            f"-> {out_dir}/\n  dispositions: {s['dispositions']}")
    return line, not_an_archive(archive, st.payloads, s)


def _done(problem: str | None) -> int:
    """Exit status 2 (and one warning line) when the archive held no payload at all."""
    from newsflow.cli.main import warn

    if problem is None:
        return 0
    warn(problem)
    return 2


def cmd_replay(args: argparse.Namespace) -> int:
    from newsflow.cli.main import output_dir, processes_of, workers_of
    from newsflow.config import load_settings

    settings_a = load_settings(args.config)
    settings_b = load_settings(args.compare) if args.compare else None
    total, size = count_payloads(args.archive)
    workers = workers_of(args, settings_a)
    processes = processes_of(args, archive_bytes=size, partitions=settings_a.flow.file_partitions)
    out = output_dir(args.out or tempfile.mkdtemp(prefix="newsflow-replay-"))
    progress = not args.no_progress
    if settings_b is None:
        st = replay_once(args.archive, out, settings_a, workers=workers, total=total,
                         label=Path(args.config).stem if args.config else "replay", progress=progress,
                         processes=processes)
        line, problem = _summary("replay", st, out, settings_a, args.archive, processes)
        print(line, flush=True)
        return _done(problem)
    la, lb = labels_for(args.config, args.compare)
    runs = []
    for label, settings, sub in ((la, settings_a, "a"), (lb, settings_b, "b")):
        st = replay_once(args.archive, output_dir(out / sub), settings, workers=workers, total=total,
                         label=label, progress=progress, processes=processes)
        line, problem = _summary(label, st, out / sub, settings, args.archive, processes)
        print(line)
        runs.append(load_run(label, out / sub, settings))
    md, page = write_report(out, runs[0], runs[1], {
        "archive": f"{Path(args.archive).name} ({total} raw payloads)",
    })
    print(f"comparison: {md}\n            {page}", flush=True)
    return _done(problem)  # the same archive both times: the second run's verdict is the first's


def register(subparsers: Any) -> None:
    """Add ``replay`` to the ``newsflow`` command."""
    p = subparsers.add_parser(
        "replay", help="backtest: replay an archive with a config; --compare a second config",
        description=help_text(__doc__ or ""), epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("archive", help="raw-payload archive: a *.jsonl[.gz] file or a directory of them")
    p.add_argument("--config", help="settings TOML of the (baseline) run (default: the defaults)")
    p.add_argument("--out", help="output directory (default: a new temp dir)")
    p.add_argument("--compare", metavar="C2", help="second settings TOML: replay again and report the changes")
    p.add_argument("--workers", type=int, default=1, help="worker threads (same output for any number)")
    p.add_argument("--processes", default="auto",
                   help="local processes, or auto (the default): one per core (at most one per input "
                        "partition) for an archive of 12 MB of payloads or more, else one; the same "
                        "output for any number")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_replay)
