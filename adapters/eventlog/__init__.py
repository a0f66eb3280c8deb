"""The event log: event store wiring, msgpack transcoder, log reader, event records."""
