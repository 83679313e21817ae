"""The logic of each stateful step of the dataflow, one module per step (Bytewax
``StatefulLogic`` classes over the pure step packages; wired in :mod:`newsflow.flows.pipeline`)."""
