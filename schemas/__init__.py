"""The topic JSON Schemas (data files, shipped with the package)."""
