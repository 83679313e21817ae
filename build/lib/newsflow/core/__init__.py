"""Shared primitives: stable hashes (never ``hash()``), event-time conversions, the watermark aligner.
"""
