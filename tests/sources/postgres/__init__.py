"""The Postgres sources' tests (a package, so that its conftest keeps its own name)."""
