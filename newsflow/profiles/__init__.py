"""Interest profiles that learn: the relevance of importance (docs/rules.md#relevance,
docs/rules.md#interest-profiles).

Pure logic, no Bytewax, no Kafka, no wall clock:

* :mod:`.config` — named profiles from explicit subscriptions (topics as weighted keyword lists,
  feed categories, publishers) and the learning rates;
* :mod:`.vectors` — the one article vector: stem hashes of title x2 + first 200 words (the space
  of :func:`newsflow.scoring.importance.relevance_score`) plus ``category:`` / ``publisher:``
  meta terms, sublinear TF, L2-normalized;
* :mod:`.state` — a profile's live weights, the update rules (read/save toward, skip/hide away)
  and the event-time decay (10 % per week of every weight not engaged);
* :mod:`.interactions` — parsing and checking ``interactions`` records.
"""
