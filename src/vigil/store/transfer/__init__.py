"""Moving a profile's session store from SQLite to PostgreSQL (``vigil store migrate``).

``tables`` names what is copied and the canonical form both sides are hashed in, ``source``
reads the SQLite store, ``target`` writes and reads back the PostgreSQL schema, ``migrate``
runs the copy and the verification.
"""
