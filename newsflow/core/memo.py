"""A bounded, thread-safe memo (least recently used out) for pure computations."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any


class BoundedMemo:
    """Keeps the last ``size`` values by key. Outputs never depend on it: a miss recomputes the
    same value. Values are never ``None`` and never modified by their users."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any, make: Callable[[], Any]) -> Any:
        with self.lock:
            v = self.data.get(key)
            if v is not None:
                self.data.move_to_end(key)
                return v
        v = make()
        with self.lock:
            self.data[key] = v
            while len(self.data) > self.size:
                self.data.popitem(last=False)
        return v

    def grow(self, size: int) -> None:
        """Keep at least ``size`` values from now on (never fewer than before)."""
        with self.lock:
            self.size = max(self.size, size)
