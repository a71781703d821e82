"""``python -m stream_nb.cli``: the ``stream-nb`` command."""

from __future__ import annotations

import sys

from stream_nb.cli import main

sys.exit(main())
