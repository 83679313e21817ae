"""``newsflow import-snapshots DIR -o ARCHIVE``: saved feed documents -> a ``feeds.raw`` archive.

DIR is either a folder of timestamped feed files (a crawl) or a git repository whose history
holds versions of feed files (git scraping); ``--source auto`` (the default) takes DIR as a git
history when it is the top of a git work tree (``DIR/.git`` exists).

* **Folder**: every file under DIR (hidden ones aside) whose name matches ``--glob`` (default:
  ``*.xml``, ``*.rss``, ``*.atom``, ``*.rdf``, each optionally ``.gz``) is one poll. Its time is
  the ISO 8601 time in its name (``npr_2026-02-08T12-30-00Z.xml``, ``20260208-123000.xml``,
  ``…+01:00``; UTC when the name has no zone) or a 10/13-digit epoch, else the time in the name
  of a folder it is in (``2026-02-08T12-00-00Z/npr.xml``); without either it takes the file's
  modification time (the summary counts those).
* **Git history**: every commit (of HEAD's history) that added or changed a matching file is
  one poll of that file's version, at the commit's committer time (a time in the file's or
  a folder's name wins, as above). Read with the ``git`` command.

The feed id is the file name without its time, extension and separators, or its folder's name
when nothing is left (``npr/2026-02-08T12-30-00Z.xml`` -> ``npr``); ``--feed-id NAME=ID`` maps
a derived name to another id, ``--feed-id ID`` gives every snapshot one id. ``--registry
feeds.toml`` copies each feed's URL, publisher, tier, category and language into its polls.

Polls are written in (time, feed id, source) order as ``feeds.raw`` v1 envelopes (``.jsonl``
or ``.jsonl.gz``), so the same snapshots give the same bytes; ``newsflow replay`` and
``newsflow demo --input`` read the archive. A snapshot that cannot be a poll (empty, not a
feed document, unreadable, too large, no feed id, a second one of a feed at the same time) is
one line on stderr and counted; it never stops the import.

Examples::

    newsflow import-snapshots crawl/ -o feeds.raw.jsonl.gz
    newsflow import-snapshots scraped-feeds-repo/ -o feeds.raw.jsonl.gz --registry feeds.toml
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import io
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

from newsflow.replay.snapshots import (
    FEED_SUFFIXES,
    MAX_BODY_BYTES,
    FeedMeta,
    Snapshot,
    feed_name,
    name_time,
    plan,
    strip_suffixes,
    to_poll,
)

EPILOG = """examples:
  newsflow import-snapshots crawl/ -o feeds.raw.jsonl.gz
  newsflow import-snapshots scraped-feeds-repo/ -o feeds.raw.jsonl.gz --registry feeds.toml
  newsflow import-snapshots one-feed/ -o npr.jsonl --feed-id npr
"""
DEFAULT_GLOBS = tuple(f"*{s}{gz}" for s in FEED_SUFFIXES for gz in ("", ".gz"))


class IdMap:
    """``--feed-id`` values: ``NAME=ID`` entries and at most one bare ``ID`` for all."""

    def __init__(self, values: list[str]) -> None:
        from newsflow.cli.main import UserError

        self.all: str | None = None
        self.names: dict[str, str] = {}
        for v in values:
            name, eq, fid = v.partition("=")
            if eq:
                if not name or not fid:
                    msg = f"--feed-id {v!r}: expected NAME=ID"
                    raise UserError(msg)
                self.names[name] = fid
            elif self.all is not None and self.all != v:
                msg = f"--feed-id {v!r}: only one --feed-id without NAME= (already {self.all!r})"
                raise UserError(msg)
            else:
                self.all = v

    def __call__(self, derived: str) -> str:
        return self.all if self.all is not None else self.names.get(derived, derived)


def _matches(name: str, globs: tuple[str, ...]) -> bool:
    low = name.lower()
    return any(fnmatch.fnmatchcase(low, g.lower()) for g in globs)


def _snapshot(rel: str, fallback_ms: int, ref: str, source: str, ids: IdMap,
              suffixes: tuple[str, ...]) -> tuple[Snapshot, bool]:
    """The snapshot at ``rel``, and whether a name gave its time: the file's name, else its
    folders' (innermost first: ``2026-02-08T12-00-00Z/npr.xml``), else ``fallback_ms``."""
    parts = rel.split("/")
    stem = strip_suffixes(parts[-1], suffixes)
    hit = name_time(stem)
    if hit is not None:
        return Snapshot(source, ids(feed_name(rel, hit[1])), hit[0], ref), True
    for folder in reversed(parts[:-1]):
        t = name_time(folder)
        if t is not None:
            return Snapshot(source, ids(feed_name(parts[-1], stem)), t[0], ref), True
    return Snapshot(source, ids(feed_name(rel, stem)), fallback_ms, ref), False


def folder_snapshots(root: Path, globs: tuple[str, ...], ids: IdMap,
                     suffixes: tuple[str, ...]) -> tuple[list[Snapshot], int, list[str]]:
    """The snapshots of a folder, how many took their file's modification time, and one line
    per file that could not even be looked at."""
    out: list[Snapshot] = []
    bad: list[str] = []
    by_mtime = 0
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")) or not _matches(f.name, globs):
            continue
        try:
            if f.is_dir():
                continue
            if not f.is_file():
                bad.append(f"{rel}: not a regular file")
                continue
            mtime_ms = f.stat().st_mtime_ns // 1_000_000
        except OSError as e:
            bad.append(f"{rel}: unreadable: {e.strerror or e}")
            continue
        s, named = _snapshot(rel, mtime_ms, str(f), rel, ids, suffixes)
        by_mtime += not named
        out.append(s)
    return out, by_mtime, bad


def _git(root: Path, *args: str) -> bytes:
    from newsflow.cli.main import UserError

    try:
        res = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)
    except OSError as e:
        msg = f"cannot run git: {e.strerror or e}"
        raise UserError(msg) from None
    if res.returncode != 0:
        msg = f"git {args[0]} in {root}: {res.stderr.decode(errors='replace').strip()[:300]}"
        raise UserError(msg)
    return res.stdout


def git_snapshots(root: Path, globs: tuple[str, ...], ids: IdMap,
                  suffixes: tuple[str, ...]) -> list[Snapshot]:
    """One snapshot per (commit, matching file it added or changed) of HEAD's history; a
    merge commit's changes are its parents' commits'."""
    log = _git(root, "log", "--no-renames", "--diff-filter=AMT", "--name-only", "-z",
               "--format=%x01%H %ct", "HEAD")
    out: list[Snapshot] = []
    for chunk in log.decode("utf-8", "surrogateescape").split("\x01")[1:]:
        head, _, files = chunk.partition("\x00")
        commit, ct = head.split(" ")
        for rel in files.lstrip("\n").split("\x00"):
            if rel and _matches(rel.rsplit("/", 1)[-1], globs):
                out.append(_snapshot(rel, int(ct) * 1000, f"{commit}:{rel}", f"{commit[:12]}:{rel}", ids,
                                     suffixes)[0])
    return out


class GitBlobs:
    """Reads file versions through one ``git cat-file --batch`` process."""

    def __init__(self, root: Path) -> None:
        self._p = subprocess.Popen(["git", "-C", str(root), "cat-file", "--batch"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE)

    def read(self, ref: str) -> bytes:
        stdin, stdout = self._p.stdin, self._p.stdout
        assert stdin is not None and stdout is not None
        if "\n" in ref:
            msg = "a path with a line break"
            raise OSError(msg)
        stdin.write(ref.encode("utf-8", "surrogateescape") + b"\n")
        stdin.flush()
        header = stdout.readline().split()
        if len(header) != 3:
            msg = f"git cat-file: {b' '.join(header[1:]).decode(errors='replace') or 'no answer'}"
            raise OSError(msg)
        size = int(header[2])
        if size > MAX_BODY_BYTES:  # drained, not kept
            left = size + 1  # (and the newline after the contents)
            while left > 0:
                chunk = stdout.read(min(1 << 20, left))
                if not chunk:
                    break
                left -= len(chunk)
            msg = f"larger than {MAX_BODY_BYTES} bytes"
            raise TooLargeError(msg)
        data = stdout.read(size)
        stdout.read(1)  # the newline after the contents
        return data

    def close(self) -> None:
        if self._p.stdin is not None:
            self._p.stdin.close()
        self._p.wait()


class TooLargeError(ValueError):
    """A snapshot larger than a poll's body may be (read no further)."""


def _body(raw: bytes, name: str, limit: int = MAX_BODY_BYTES) -> bytes:
    """The document's bytes (a ``.gz`` snapshot decompressed, at most ``limit`` + 1 bytes of it)."""
    if name.lower().endswith(".gz"):
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
            raw = gz.read(limit + 1)
    if len(raw) > limit:
        msg = f"larger than {limit} bytes"
        raise TooLargeError(msg)
    return raw


def _read_file(path: str, limit: int = MAX_BODY_BYTES) -> bytes:
    """A snapshot file's bytes: a regular file of at most ``limit`` bytes (a ``.gz`` one: its
    compressed size), without reading more."""
    import os
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            msg = "not a regular file"
            raise OSError(msg)
        if st.st_size > limit:
            msg = f"larger than {limit} bytes"
            raise TooLargeError(msg)
        return fh.read(limit + 1)


def _meta(path: str | None) -> dict[str, FeedMeta]:
    from newsflow.cli.main import UserError
    from newsflow.polling.registry import RegistryError, load_registry

    if path is None:
        return {}
    try:
        reg = load_registry(path)
    except RegistryError as e:
        raise UserError(str(e)) from None
    return {f.id: FeedMeta(f.url, f.publisher, f.tier, f.category, f.language) for f in reg.feeds}


class _GzipOut(gzip.GzipFile):
    """A gzip file whose header names no file and no time: the same polls, the same bytes."""

    def __init__(self, path: Path) -> None:
        self._raw = path.open("wb")
        super().__init__(filename="", mode="wb", compresslevel=5, fileobj=self._raw, mtime=0)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def _open_out(path: Path) -> BinaryIO:
    return cast(BinaryIO, _GzipOut(path)) if path.name.endswith(".gz") else path.open("wb")


def _warn(line: str) -> None:
    sys.stderr.write(f"newsflow: skipped {line}\n")


def cmd_import_snapshots(args: argparse.Namespace) -> int:
    from newsflow.cli.main import UserError
    from newsflow.wire.codec import encode_raw

    root = Path(args.dir)
    if not root.is_dir():
        msg = f"{args.dir!r} is not a directory"
        raise UserError(msg)
    out = Path(args.out)
    if not out.name.endswith((".jsonl", ".jsonl.gz")):
        msg = f"-o {args.out!r}: the archive's name must end in .jsonl or .jsonl.gz"
        raise UserError(msg)
    source = args.source
    if source == "auto":
        source = "git" if (root / ".git").exists() else "files"
    globs = tuple(args.glob) if args.glob else DEFAULT_GLOBS
    suffixes = tuple(sorted({"." + g.rsplit(".", 1)[-1] for g in globs if "." in g and not g.endswith(".gz")}
                            | set(FEED_SUFFIXES), key=lambda s: (-len(s), s)))
    ids = IdMap(args.feed_id or [])
    meta = _meta(args.registry)
    bad: list[str] = []
    by_mtime = 0
    if source == "git":
        snaps = git_snapshots(root, globs, ids, suffixes)
    else:
        snaps, by_mtime, bad = folder_snapshots(root, globs, ids, suffixes)
    todo, unplanned = plan(snaps)
    bad += unplanned
    for line in bad:
        _warn(line)
    polls = 0
    feeds: set[str] = set()
    first = last = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fh = _open_out(out)
    except OSError as e:
        msg = f"cannot write {args.out!r}: {e.strerror or e}"
        raise UserError(msg) from None
    blobs = GitBlobs(root) if source == "git" else None
    try:
        with fh:
            for s in _read_all(todo, blobs, bad):
                snap, body = s
                poll = to_poll(snap, body, meta.get(snap.feed_id))
                if isinstance(poll, str):
                    bad.append(f"{snap.source}: {poll}")
                    _warn(bad[-1])
                    continue
                fh.write(encode_raw(poll)[1] + b"\n")
                polls += 1
                feeds.add(snap.feed_id)
                first = snap.fetched_ms if first is None else first
                last = snap.fetched_ms
    finally:
        if blobs is not None:
            blobs.close()
    from newsflow.core.timeutil import ms_to_iso

    span = f", {ms_to_iso(first)} .. {ms_to_iso(last)}" if first is not None and last is not None else ""
    dated = f"; {by_mtime} dated by their file's modification time" if by_mtime else ""
    print(f"wrote {polls} polls of {len(feeds)} feeds to {out} (from {source}: {len(snaps)} "
          f"snapshots{span}); {len(bad)} skipped{dated}", flush=True)
    return 0 if polls else 2


def _read_all(todo: list[Snapshot], blobs: GitBlobs | None, bad: list[str]) -> Iterator[tuple[Snapshot, bytes]]:
    for s in todo:
        try:
            raw = blobs.read(s.ref) if blobs is not None else _read_file(s.ref)
            body = _body(raw, s.source)
        except TooLargeError as e:
            bad.append(f"{s.source}: {e}")
            _warn(bad[-1])
            continue
        except (OSError, EOFError, zlib.error) as e:
            bad.append(f"{s.source}: unreadable: {getattr(e, 'strerror', None) or e}")
            _warn(bad[-1])
            continue
        yield s, body


def register(subparsers: Any) -> None:
    """Add ``import-snapshots`` to the ``newsflow`` command."""
    from newsflow.cli.replay import help_text

    p = subparsers.add_parser(
        "import-snapshots", help="a folder of timestamped feed files, or a git history of them -> a feeds.raw archive",
        description=help_text(__doc__ or ""), epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", metavar="DIR", help="folder of feed snapshots, or a git repository of feed files")
    p.add_argument("-o", "--out", required=True, metavar="ARCHIVE", help="the archive to write (.jsonl or .jsonl.gz)")
    p.add_argument("--source", choices=("auto", "files", "git"), default="auto",
                   help="files: DIR's files; git: DIR's git history; auto (the default): git when DIR/.git exists")
    p.add_argument("--glob", action="append", metavar="PATTERN",
                   help="file names that are snapshots (repeatable; default: *.xml *.rss *.atom *.rdf, each also .gz)")
    p.add_argument("--feed-id", action="append", metavar="NAME=ID|ID",
                   help="NAME=ID: snapshots whose derived feed id is NAME are of feed ID (repeatable); "
                        "ID alone: every snapshot is of feed ID")
    p.add_argument("--registry", metavar="FEEDS_TOML",
                   help="feed registry: each feed's url, publisher, tier, category, language go into its polls")
    p.set_defaults(func=cmd_import_snapshots)
