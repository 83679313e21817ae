"""De-duplication (docs/rules.md#deduplication): exact layers (GUID + content hash, canonical URL) in keyed shards, then
the similarity layers (titles, body MinHash) and the story centroid that group articles into
stories (``story_features`` -> ``story_index`` -> ``story_decision`` -> ``story_assigner``).
"""
