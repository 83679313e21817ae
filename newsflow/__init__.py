"""newsflow: RSS/Atom feeds -> Kafka -> one Bytewax dataflow -> Kafka.

Pure, typed domain steps live in this package (normalize, dedup, score, cluster, digest);
``flows/`` only wires them into Bytewax dataflows and ``connectors/`` only does I/O.
"""

from __future__ import annotations

__version__ = "0.1.0"
