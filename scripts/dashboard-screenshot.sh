#!/usr/bin/env bash
# Render the dashboard's main queries from a real run to docs/img/dashboard.png:
#
#   bash scripts/dashboard-screenshot.sh            # about 4 minutes
#   bash scripts/dashboard-screenshot.sh OUT.png
#
# Runs `stream-nb run` on a growing file of demo events (with a burst of bad lines
# and, later, a concept drift), Debian's Prometheus scraping it every second with
# deploy/prometheus/*.yml loaded, then Debian's headless Chromium on the console
# deploy/prometheus/consoles/stream-nb.html that this Prometheus serves. Installs
# chromium and prometheus (apt-get) when missing. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
{ command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ]; } || missing+=(prometheus)
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python="${PYTHON:-.venv/bin/python}"
[ -x "${python}" ] || python=python3
exec "${python}" scripts/dashboard_screenshot.py "$@"
