"""Step 3, de-duplication: exact layers (GUID + content hash, canonical URL) in keyed shards, then
the similarity layers (titles, MinHash LSH, entities) that group articles into stories.
"""
