"""I/O only: files, Kafka, HTTP fetching, the poller's Bytewax source and sink.
"""
