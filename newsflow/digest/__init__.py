"""Digests: event-time schedule, assembly (sections, leads, labels, trends), the feed
health report, Markdown/HTML rendering.
"""
