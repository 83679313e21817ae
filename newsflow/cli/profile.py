"""``newsflow profile show NAME [--config TOML] [--digests FILE.jsonl] [--top N]``.

Profiles are the ``[profiles]`` section of the one configuration (``--config`` /
``NEWSFLOW_CONFIG``, ``NEWSFLOW_PROFILES__...`` variables).

Prints a profile's top terms: as configured (its subscriptions as a vector), or, with
``--digests``, as learned — the top terms carried by the profile's latest digest in a dump of
the ``digests`` topic (``newsflow demo --interactions ... --out DIR`` writes ``DIR/digests.jsonl``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import orjson


def cmd_show(args: argparse.Namespace) -> int:
    from newsflow.cli.main import load_config
    from newsflow.profiles.state import ProfileState

    cfg = load_config(args).profiles.to_config()
    spec = cfg.get(args.name)
    if spec is None:
        print(f"no profile {args.name!r}; configured: {', '.join(cfg.names)}", file=sys.stderr)
        return 2
    terms: list[tuple[str, float]]
    source = "configured"
    if args.digests:
        latest: dict[str, Any] | None = None
        with open(args.digests, "rb") as f:
            for line in f:
                if line.strip():
                    d = orjson.loads(line)
                    if (d.get("profile") or {}).get("id") == args.name and (
                            latest is None or d["window_end"] >= latest["window_end"]):
                        latest = d
        if latest is None:
            print(f"no digest of profile {args.name!r} in {args.digests}", file=sys.stderr)
            return 1
        terms = [(t["term"], t["weight"]) for t in latest["profile"]["top_terms"]]
        source = f"learned, as of {latest['window_end']}"
    else:
        terms = ProfileState.from_spec(spec).top_terms(None, cfg.rates, args.top)
    print(f"profile {spec.name} ({source}); digests: {', '.join(spec.digests) or 'none'}")
    if not terms:
        print("  (no terms: relevance is the neutral 50)")
    for term, w in terms[: args.top]:
        print(f"  {w:+8.4f}  {term}")
    return 0


def register(sub: Any) -> None:
    from newsflow.cli.main import add_command

    p = add_command(sub, "profile", "interest profiles: show a profile's top terms",
                    "newsflow profile show default --config newsflow.toml")
    ps = p.add_subparsers(dest="profile_cmd", required=True)
    s = add_command(ps, "show", "a profile's top terms (configured, or learned with --digests)",
                    "newsflow profile show reader --config newsflow.toml --digests /tmp/demo/digests.jsonl")
    s.add_argument("name")
    s.add_argument("--config", help="configuration TOML with a [profiles] section (default: $NEWSFLOW_CONFIG; "
                                    "without profiles: only 'default')")
    s.add_argument("--digests", help="a digests dump: show the terms learned as of the profile's latest digest")
    s.add_argument("--top", type=int, default=15)
    s.set_defaults(func=cmd_show)
