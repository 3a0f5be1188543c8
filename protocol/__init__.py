"""The Kafka wire protocol, sans-I/O.

Owns framing, request/response headers, the codecs of every supported API version (generated from
Kafka's JSON message schemas), record batches, compression and error codes. Imports nothing else of
Samsa's and nothing of asyncio.
"""
