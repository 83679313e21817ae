"""Topics: the online k-means of river over the stream, and the batch DBSCAN / Ward of one
digest window (docs/rules.md#topics-and-digests).
"""
