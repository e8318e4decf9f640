"""Postgres databases as memory sources: a LangGraph ``PostgresStore``, inspected where it
lives, in place of a store PATH (``memtui postgresql://...``).

The package: ``url`` (the URL as given, its form without the password, scrubbing a
driver's message), ``connection`` (one psycopg connection: read-only in the database
unless writes are allowed, retried while busy, failures as one line), ``catalog``
(what a schema holds, from the system catalogs) and ``kinds`` (the kinds of store
recognized in a schema, and opening a URL as the first that recognizes it).

psycopg is imported only when a Postgres store is opened: memtui runs without the
``postgres`` extra, and opening a URL without it is one line naming the extra.
"""
