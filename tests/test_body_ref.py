"""``body_ref`` is read only from the configured blob directory, regular files only."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from newsflow.connectors.files import BodyRefError, resolve_body_ref
from newsflow.model.records import RawPayload

SECRET = b"<rss><channel><item><title>secret</title></item></channel></rss>"


def payload(ref: str) -> RawPayload:
    return RawPayload("f", "http://x/", 1_772_431_200_000, 200, None, body_ref=ref)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    blobs = tmp_path / "blobs"
    (blobs / "ab").mkdir(parents=True)
    (blobs / "ab" / "good").write_bytes(b"<rss/>")
    outside = tmp_path / "outside.xml"
    outside.write_bytes(SECRET)
    return blobs, outside


def refused(ref: str, blob_dir: Path | None, reason: str = "body_ref_refused") -> None:
    with pytest.raises(BodyRefError) as ei:
        resolve_body_ref(payload(ref), blob_dir)
    assert ei.value.reason == reason
    assert "secret" not in str(ei.value)


def test_a_blob_inside_the_directory_is_read(dirs: tuple[Path, Path]) -> None:
    blobs, _ = dirs
    assert resolve_body_ref(payload((blobs / "ab" / "good").as_uri()), blobs).body == b"<rss/>"
    # a relative blob_dir works too (resolved like the ref)
    rel = os.path.relpath(blobs)
    assert resolve_body_ref(payload((blobs / "ab" / "good").as_uri()), rel).body == b"<rss/>"


def test_files_outside_the_blob_directory_are_refused(dirs: tuple[Path, Path]) -> None:
    blobs, outside = dirs
    refused("file:///etc/passwd", blobs)
    refused("file:///proc/self/environ", blobs)
    refused(outside.as_uri(), blobs)
    refused((blobs / "ab" / ".." / ".." / "outside.xml").as_uri(), blobs)  # dot-dot out
    refused(f"file://{blobs}/ab/%2e%2e/%2e%2e/outside.xml", blobs)  # percent-encoded dot-dot
    refused(blobs.as_uri(), blobs)  # the directory itself
    refused((blobs / "ab" / "good").as_uri(), None)  # no blob dir configured: nothing is read


def test_symlinks_out_fifos_and_devices_are_refused(dirs: tuple[Path, Path]) -> None:
    blobs, outside = dirs
    (blobs / "ab" / "link").symlink_to(outside)
    refused((blobs / "ab" / "link").as_uri(), blobs)
    (blobs / "ab" / "inner").symlink_to(blobs / "ab" / "good")  # a link that stays inside is fine
    assert resolve_body_ref(payload((blobs / "ab" / "inner").as_uri()), blobs).body == b"<rss/>"
    fifo = blobs / "ab" / "fifo"
    os.mkfifo(fifo)
    done = threading.Event()

    def check() -> None:
        refused(fifo.as_uri(), blobs)
        done.set()

    t = threading.Thread(target=check, daemon=True)
    t.start()
    t.join(5)
    assert done.is_set(), "reading a FIFO blocked"
    (blobs / "ab" / "dev").symlink_to("/dev/zero")
    refused((blobs / "ab" / "dev").as_uri(), blobs)


def test_other_schemes_and_hosts_are_refused(dirs: tuple[Path, Path]) -> None:
    blobs, _ = dirs
    for ref in ("http://127.0.0.1/blob", "https://example.org/x", "ftp://h/x", "data:,hello",
                f"file://otherhost{blobs}/ab/good", "ab/good", "s3://bucket/key"):
        refused(ref, blobs)


def test_missing_and_oversized_blobs(dirs: tuple[Path, Path]) -> None:
    blobs, _ = dirs
    refused((blobs / "ab" / "gone").as_uri(), blobs, "body_ref_unreadable")
    with pytest.raises(BodyRefError) as ei:
        resolve_body_ref(payload((blobs / "ab" / "good").as_uri()), blobs, max_bytes=3)
    assert ei.value.reason == "body_ref_too_large"
