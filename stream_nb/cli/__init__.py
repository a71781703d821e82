"""The ``stream-nb`` command: run the daemon, evaluate models, inspect and merge snapshots.

Subcommands
-----------
``run``      read events, predict, emit, learn; dead letters, checkpoints, metrics
``eval``     prequential run of one or several models over a file: report, curve CSV, plot
``inspect``  describe a snapshot (classes, counts, features, size, informative features)
``merge``    merge the models of several snapshots into one snapshot
``demo``     print a seeded demo stream as JSON lines

Every flag can also be set with an environment variable ``STREAM_NB_<FLAG>``
(``--checkpoint-dir`` → ``STREAM_NB_CHECKPOINT_DIR``); a flag on the command
line wins. ``--help`` shows both and the defaults.
"""

from stream_nb.cli.entry import console, main
from stream_nb.cli.flags import DAEMON_BOUNDS, daemon_params, parse_metrics_address
from stream_nb.cli.parser import build_parser

__all__ = [
    "DAEMON_BOUNDS",
    "build_parser",
    "console",
    "daemon_params",
    "main",
    "parse_metrics_address",
]
