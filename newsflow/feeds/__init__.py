"""Parse + normalize: raw payload -> articles (feedparser, or the C-ElementTree fast path),
URL canonicalization and registrable domains (docs/rules.md#parsing-and-normalization).
"""
