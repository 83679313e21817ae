"""Import targets for ``python -m bytewax.run`` / ``python -m bytewax.testing`` (several
processes): the flow is built from environment variables. The configuration is the file in
``NEWSFLOW_CONFIG`` plus ``NEWSFLOW_<SECTION>__<KEY>`` variables, as for every command.

    NEWSFLOW_INPUT=archive/ NEWSFLOW_OUT=out/ python -m bytewax.testing flows.entry:file_flow -p 2
    NEWSFLOW_CONFIG=newsflow.toml NEWSFLOW_KAFKA__BROKERS=host:9092 \
        python -m bytewax.run flows.entry:kafka_flow -w 1
"""

from __future__ import annotations

import os

from newsflow.config import Settings, load_settings
from newsflow.flows import pipeline


def _settings() -> Settings:
    return load_settings()  # NEWSFLOW_CONFIG and NEWSFLOW_* variables


def file_flow():  # type: ignore[no-untyped-def]
    return pipeline.file_flow(os.environ["NEWSFLOW_INPUT"], os.environ["NEWSFLOW_OUT"], _settings())


def kafka_flow():  # type: ignore[no-untyped-def]
    settings = _settings()
    tail = os.environ.get("NEWSFLOW_UNTIL_EOF", "") not in ("1", "true")
    return pipeline.kafka_flow(list(settings.kafka.brokers), settings, tail=tail)
