"""The gateway's tables in the session store, written once for both backends: routes, the
durable inbox and outbox (``gateway_tables``, the protocol and its records; ``gateway_rows``,
their rows and checks), pairing codes and paired platform users (``pairing_tables``,
``pairing_rows``). Each backend implements them beside its store (``sqlite/gateway_tables.py``,
``postgres/pairing_tables.py`` ...)."""
