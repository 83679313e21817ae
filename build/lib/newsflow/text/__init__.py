"""Text rules shared by every step: HTML to text, title normalization, tokens and stems, named
entities.
"""
