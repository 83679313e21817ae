"""Import targets for ``python -m bytewax.run`` / ``python -m bytewax.testing`` (several
processes): the flow is built from environment variables. The configuration is the file in
``NEWSFLOW_CONFIG`` plus ``NEWSFLOW_<SECTION>__<KEY>`` variables, as for every command.

    NEWSFLOW_INPUT=archive/ NEWSFLOW_OUT=out/ python -m bytewax.testing flows.entry:file_flow -p 2
    NEWSFLOW_CONFIG=newsflow.toml NEWSFLOW_KAFKA__BROKERS=host:9092 \\
        python -m bytewax.run flows.entry:kafka_flow -w 1 [-r DIR -s 5 -b 0]

Given a recovery directory (``-r``/``--recovery-directory``, or ``BYTEWAX_RECOVERY_DIRECTORY``),
the flow is built for recovery as ``newsflow run --recovery-dir`` builds it: each step's snapshot
is frozen when it is taken (:mod:`newsflow.core.snapshot`; an unfrozen snapshot would be
pickled by Bytewax later, after the state moved on), and the poison-message journal is kept in
that directory (:mod:`newsflow.connectors.inflight`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from newsflow.config import Settings, load_settings
from newsflow.flows import pipeline


def _settings() -> Settings:
    return load_settings()  # NEWSFLOW_CONFIG and NEWSFLOW_* variables


def recovery_dir_of(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The recovery directory ``bytewax.run`` / ``bytewax.testing`` were given on their command
    line (``-r DIR``, ``-rDIR``, ``--recovery-directory DIR`` or ``=DIR``), else in
    ``BYTEWAX_RECOVERY_DIRECTORY``; None without recovery.

    >>> recovery_dir_of(["flows.entry:kafka_flow", "-r", "rec", "-s", "5", "-b", "0"], {})
    'rec'
    >>> recovery_dir_of(["x", "--recovery-directory=/r"], {}), recovery_dir_of(["x", "-w", "2"], {})
    ('/r', None)
    """
    for i, a in enumerate(argv):
        if a in ("-r", "--recovery-directory"):
            return argv[i + 1] if i + 1 < len(argv) else None
        if a.startswith("--recovery-directory="):
            return a.split("=", 1)[1]
        if a.startswith("-r") and not a.startswith("--") and len(a) > 2:
            return a[2:]
    return env.get("BYTEWAX_RECOVERY_DIRECTORY") or None


def file_flow():  # type: ignore[no-untyped-def]
    rec = recovery_dir_of(sys.argv[1:], os.environ)
    return pipeline.file_flow(os.environ["NEWSFLOW_INPUT"], os.environ["NEWSFLOW_OUT"], _settings(),
                              recovery=rec is not None, inflight_dir=rec)


def kafka_flow():  # type: ignore[no-untyped-def]
    settings = _settings()
    tail = os.environ.get("NEWSFLOW_UNTIL_EOF", "") not in ("1", "true")
    rec = recovery_dir_of(sys.argv[1:], os.environ)
    return pipeline.kafka_flow(list(settings.kafka.brokers), settings, tail=tail,
                               recovery=rec is not None, inflight_dir=rec)
