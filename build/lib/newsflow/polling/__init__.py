"""Step 1, polling: pure rules (conditional GET, 301/304/410/429, adaptive intervals), fetch
safety, the cheap body scan, the feed registry.
"""
