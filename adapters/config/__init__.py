"""The settings: one pydantic-settings model read from ``LETTERLOG_*`` (``settings``).

May import: ``domain`` and ``adapters.startup.envsettings`` (the settings' stdlib half); nothing
else of ``adapters``.
"""
