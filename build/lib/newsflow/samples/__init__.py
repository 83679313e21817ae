"""Inputs that ship with the project: the demo's synthetic feeds and the UCI headline importer.
"""
