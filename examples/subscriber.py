"""A subscriber of a newsflow topic as a service: poll forever, commit each message after it is
processed, stop cleanly on Ctrl-C / SIGTERM (``docker stop``, systemd).

    pip install confluent-kafka
    python examples/subscriber.py --brokers localhost:9092 --topic digests --group my-digest-reader

A restart with the same ``--group`` goes on after the last committed message. A message is
committed only once processed, so a crash in between processes it again (at least once): the
records' keys are idempotent (a digest's ``digest_id``), so processing one twice is harmless.
Messages of a contract version the subscriber does not know are skipped (and committed): within a
version fields may be added, so unknown fields are ignored.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from confluent_kafka import Consumer, KafkaException


def process(digest: dict[str, Any]) -> None:
    """What the subscriber does with a record (here: one line on stdout)."""
    print(digest["digest_id"], digest["title"], digest["article_count"], flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="localhost:9092")
    ap.add_argument("--topic", default="digests")
    ap.add_argument("--group", default="my-digest-reader")
    args = ap.parse_args(argv)

    stopping = []  # a signal asks the loop to end after the message in hand
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))

    consumer = Consumer({"bootstrap.servers": args.brokers, "group.id": args.group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([args.topic])
    try:
        while not stopping:
            msg = consumer.poll(1.0)
            if msg is None:
                continue  # a quiet topic: keep waiting
            if msg.error():
                if msg.error().fatal():
                    raise KafkaException(msg.error())
                continue  # e.g. the broker is away: the client reconnects by itself
            if dict(msg.headers() or []).get("schema_version") == b"1":
                process(json.loads(msg.value()))
            consumer.commit(message=msg, asynchronous=False)  # processed: don't deliver it again
    finally:
        consumer.close()  # leaves the group at once, so its partitions move to the others
    print(f"stopped by {signal.Signals(stopping[0]).name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
