"""The ``newsflow`` command line.
"""
