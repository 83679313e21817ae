"""Step 4, importance: authority, recency, corroboration, relevance, depth (and the 004 severity
profile).
"""
