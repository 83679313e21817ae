"""Import targets for ``python -m bytewax.run`` / ``bytewax.testing`` from a checkout.

The dataflows live in :mod:`newsflow.flows`; this file only keeps the short target names
working from the repository root (it is not installed)::

    python -m bytewax.run flows.entry:file_flow
    python -m bytewax.testing "flows.entry:file_flow()" -p 2
"""

from newsflow.flows.entry import file_flow, kafka_flow

__all__ = ["file_flow", "kafka_flow"]
