"""The typed model: records (``RawPayload``, ``Article``, ``DeadLetter`` ...), the messages
between flow steps, and the vocabularies (dispositions, statuses) as ``StrEnum``.
"""
