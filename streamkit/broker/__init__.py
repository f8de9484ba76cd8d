"""streamkit's Kafka-compatible broker.

``protocol`` is the sans-IO wire layer (framing + kio codecs); ``errors`` maps exceptions
to Kafka error codes.
"""

__all__: list[str] = []
