"""Everything in the flow that depends on how Bytewax works inside, not only on its API.

Two speed-ups rely on Bytewax 0.21.1's internals:

* :mod:`~newsflow.runtime.placement`: key names chosen so that the flow's few heavy keys land
  on chosen workers. It models how Bytewax routes a key (SipHash-1-3 of its name, modulo the
  workers) and which worker reads each input partition. ``flow.placement = false`` turns it
  off: the keys are their plain names and fall where Bytewax's hash puts them.
* :mod:`~newsflow.runtime.pickling`: messages built to be pickled cheaply (:class:`Batch`,
  :class:`Shared`, :func:`fast_pickle`), because Bytewax pickles every item that goes to a key
  of another process, twice, and none that stays in its process.

Neither changes a byte of output: on a Bytewax that routed or pickled otherwise they would only
cost time (keys crowded on one worker, items pickled more often). ``tests/test_runtime_contract.py``
checks each assumption against the installed Bytewax with real worker threads and processes;
an upgrade of Bytewax must pass it, and then set :data:`BYTEWAX` and the pin in
``pyproject.toml`` to the new version (``docs/scaling.md``, *Bytewax versions*).
"""

from __future__ import annotations

#: the Bytewax version this package is checked against (``bytewax==`` in ``pyproject.toml``)
BYTEWAX = "0.21.1"
