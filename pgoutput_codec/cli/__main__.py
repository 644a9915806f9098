"""``python -m pgoutput_codec.cli``: the ``pgoutput-codec`` command."""

import sys

from .main import main

sys.exit(main())
