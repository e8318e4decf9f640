"""Benchmarks: run with ``python -m benchmarks.<name>``; timings stay out of the test suite."""
