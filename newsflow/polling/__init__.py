"""Polling: pure rules (conditional GET, 301/304/410/429, adaptive intervals), fetch safety,
the cheap body scan, the feed registry. The rules are stated in docs/rules.md#polling.
"""
