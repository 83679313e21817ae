"""The wire format: topic records (the only place dicts are built from the model) and the JSON
Schema contracts of ``schemas/``.
"""
