"""The scale-out path: outbox relay to Kafka, stream projector, faust worker."""
