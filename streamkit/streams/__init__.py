"""Stream processing on top of the broker: windows, stream time, aggregations."""
