"""Real PostgreSQL servers for the conformance tests and the corpus capture.

The implementation lives in :mod:`pgoutput_codec.testing.pgserver` (the demo, the CLI
tests and the notebook start servers the same way); this module keeps the name the
conformance conftest and ``tools/capture_corpus.py`` import.
"""

from pgoutput_codec.testing.pgserver import PgServer, ServerSpec, first_available, server_specs

__all__ = ["PgServer", "ServerSpec", "server_specs", "first_available"]
