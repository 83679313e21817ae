"""Loopback addresses for a Bytewax cluster started by a test (``bytewax.run -i N -a ...``)."""

from __future__ import annotations

import socket


def loopback_addresses(n: int) -> str:
    """``"127.0.0.1:p0;127.0.0.1:p1;..."``: ``n`` ports the kernel had free a moment ago."""
    ports = []
    for _ in range(n):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    return ";".join(f"127.0.0.1:{p}" for p in ports)
