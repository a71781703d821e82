"""Deployment tests: the Grafana dashboard, the Prometheus rules (promtool and a real
Prometheus server scraping a real daemon), the systemd unit and the local Kafka script.

The tools come from Debian packages that ``scripts/test.sh`` installs when missing
(``prometheus`` for the server and promtool, ``systemd`` for systemd-analyze); a
missing tool fails the test with the package to install, it never skips.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
