"""Import targets for ``python -m bytewax.run`` / ``python -m bytewax.testing`` (several
processes): the flow is built from environment variables.

    NEWSFLOW_INPUT=archive/ NEWSFLOW_OUT=out/ python -m bytewax.testing flows.entry:file_flow -p 2
    NEWSFLOW_BROKERS=host:9092 python -m bytewax.run flows.entry:kafka_flow -w 1
"""

from __future__ import annotations

import os

from newsflow.config import load_settings
from newsflow.flows import pipeline


def _settings():  # type: ignore[no-untyped-def]
    return load_settings(os.environ.get("NEWSFLOW_CONFIG") or None)


def file_flow():  # type: ignore[no-untyped-def]
    return pipeline.file_flow(os.environ["NEWSFLOW_INPUT"], os.environ["NEWSFLOW_OUT"], _settings())


def kafka_flow():  # type: ignore[no-untyped-def]
    brokers = os.environ["NEWSFLOW_BROKERS"].split(",")
    tail = os.environ.get("NEWSFLOW_UNTIL_EOF", "") not in ("1", "true")
    return pipeline.kafka_flow(brokers, _settings(), tail=tail)
