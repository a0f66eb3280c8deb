"""Event rules' adapters: the bounded pattern matcher (``matching``, the ``regex`` package),
the processing applications (``webhook`` through httpx and tenacity; ``kafka`` through
aiokafka, imported when a Kafka rule is first dispatched), the dispatcher that hands rule
events to them (``dispatcher``) and the facade's part (``api``); docs/event-rules.md.

May import: ``domain``, ``projections``, ``adapters.files.filemodes`` and the standard library,
httpx, tenacity, orjson, regex, aiokafka. Never ``streaming``, ``cli`` or
``devtools``.
"""
