"""Importance: authority, recency, corroboration, relevance, depth (docs/rules.md#importance),
the severity profile (docs/rules.md#severity-profile) and story phases
(docs/rules.md#story-phases).
"""
