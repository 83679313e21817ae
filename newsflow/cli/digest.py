"""``newsflow digest render FILE.jsonl [--format md|html] [--out PATH] [--digest-id ID]``.

FILE.jsonl holds digests (one JSON object per line, e.g. a dump of the ``digests`` topic);
the digest with ``--digest-id`` is rendered, or else the last final one in the file (the
last one when none is final: at the end of a replay the last lines are partial). Several
versions of one digest id (re-emits) -> the last one wins, as under log compaction.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from newsflow.digest.render import render


def load_digests(path: str | Path) -> list[dict[str, Any]]:
    out = []
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                d = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                from newsflow.cli.main import UserError

                msg = f"{path}:{n}: not JSON: {e}"
                raise UserError(msg) from None
            if isinstance(d, dict) and "value" in d and isinstance(d["value"], dict):
                d = d["value"]  # {"key":..., "value": {...}} dumps
            if isinstance(d, dict) and d.get("schema", "digests") == "digests":
                out.append(d)
    return out


def pick(digests: list[dict[str, Any]], digest_id: str | None) -> dict[str, Any] | None:
    """The last version of ``digest_id``; without one, the last *final* digest (a replay ends
    with the still open windows, ``final: false``: a partial weekly roundup is not what a reader
    asked for), or the last one when none is final."""
    if digest_id is None:
        finals = [d for d in digests if d.get("final", True) is not False]
        return finals[-1] if finals else digests[-1] if digests else None
    found = [d for d in digests if d.get("digest_id") == digest_id]
    return found[-1] if found else None


#: digest ids named when ``--digest-id`` is not in the file
SHOWN_IDS = 10


def not_found(file: str, digest_id: str | None, digests: list[dict[str, Any]]) -> str:
    """Why nothing can be rendered: no digest at all, or which ids the file does hold (the
    first :data:`SHOWN_IDS`, then "…")."""
    if not digests:
        return f"no digest in {file}"
    ids = sorted({str(x.get("digest_id")) for x in digests})
    shown = ", ".join(ids[:SHOWN_IDS]) + (", …" if len(ids) > SHOWN_IDS else "")
    return f"no digest {digest_id!r} in {file} ({len(ids)} ids: {shown})"


def cmd_render(args: argparse.Namespace) -> int:
    from newsflow.cli.main import UserError, write_out

    if not Path(args.file).is_file():
        msg = f"file {args.file!r} not found"
        raise UserError(msg)
    digests = load_digests(args.file)
    d = pick(digests, args.digest_id)
    if d is None:
        raise UserError(not_found(args.file, args.digest_id, digests))
    fmt = args.format or (
        "html" if args.out and str(args.out).endswith((".html", ".htm")) else "md"
    )
    text = render(d, fmt)
    if args.out:
        write_out(args.out, text)
        print(f"wrote {args.out} ({fmt}, {d.get('digest_id')})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def register(subparsers: Any) -> None:
    """Add ``digest render`` to the ``newsflow`` command."""
    from newsflow.cli.main import add_command

    p = add_command(subparsers, "digest", "digest tools",
                    "newsflow digest render /tmp/demo/digests.jsonl --format html --out digest.html")
    sub = p.add_subparsers(dest="digest_cmd", required=True)
    r = add_command(sub, "render", "render a digest from a JSONL file to Markdown or HTML",
                    "newsflow digest render /tmp/demo/digests.jsonl --digest-id morning_brief:2026-02-01T07:00:00Z")
    r.add_argument("file", help="JSONL file of digests (e.g. a dump of the digests topic)")
    r.add_argument("--format", choices=("md", "html"), default=None, help="default: md")
    r.add_argument("--out", default=None, help="output path (default: stdout)")
    r.add_argument("--digest-id", default=None, help="which digest (default: the last final one)")
    r.set_defaults(func=cmd_render)
