"""``python -m stream_nb.cli``: the ``stream-nb`` command."""

from __future__ import annotations

from stream_nb.cli import console

console()
