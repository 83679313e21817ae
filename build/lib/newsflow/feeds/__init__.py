"""Step 2, parse + normalize: raw payload -> articles (feedparser, or the C-ElementTree fast path),
URL canonicalization and registrable domains.
"""
