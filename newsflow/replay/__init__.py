"""Backtesting: compare the outputs of two replays of one archive under two configurations."""
