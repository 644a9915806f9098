"""Helpers for tests, the demo and notebooks: throwaway PostgreSQL servers (:mod:`.pgserver`)."""
