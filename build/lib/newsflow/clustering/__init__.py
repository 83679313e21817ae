"""Step 5, topics: the online k-means of river over the stream, and the batch DBSCAN / Ward of
one digest window.
"""
