"""Bytewax dataflows: wiring only. Each step calls a pure function of the domain packages."""
