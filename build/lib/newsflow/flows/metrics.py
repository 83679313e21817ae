"""Prometheus counters of every gate in the flow (served by Bytewax at ``/metrics`` when
``BYTEWAX_DATAFLOW_API_ENABLED=1``) and mirrored into the run summary."""

from __future__ import annotations

from prometheus_client import Counter

PAYLOADS = Counter("newsflow_payloads", "raw payloads read", ["status"])
ARTICLES = Counter("newsflow_articles", "article records emitted", ["disposition"])
DEADLETTERS = Counter("newsflow_deadletters", "dead-letter records", ["stage", "reason"])
REPOLLS = Counter("newsflow_repolls_unchanged", "re-polled unchanged items (counted, not emitted)")
MALFORMED = Counter("newsflow_malformed_items", "items without title and body", ["feed_id"])
LATE = Counter("newsflow_late_for_digest", "articles first seen after their digest window closed")
DIGESTS = Counter("newsflow_digests", "digests emitted", ["digest_type"])
