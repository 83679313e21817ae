"""newsflow: RSS/Atom feeds -> Kafka -> one Bytewax dataflow -> Kafka.

Pure, typed domain steps live in the step packages (``polling``, ``feeds``, ``dedup``, ``scoring``,
``clustering``, ``digest``); ``newsflow.flows`` only wires them into Bytewax dataflows,
``newsflow.connectors`` only does I/O. ``docs/architecture.md`` maps every package to the flow's steps.
"""

from __future__ import annotations

__version__ = "0.1.0"
