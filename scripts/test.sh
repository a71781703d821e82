#!/usr/bin/env bash
# The project's test command (README "Run the tests"; .ci/run calls exactly this).
# It installs everything the tests need on a fresh machine: a virtualenv with the
# package and its test extras, promtool (Debian's prometheus package) and the
# Apache Kafka broker jars from Maven Central; then lint, type-check and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -e '.[test]'

if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  else
    sudo apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  fi
fi

if [ -f scripts/kafka_jars.sh ]; then
  bash scripts/kafka_jars.sh
fi

ruff check .
ruff format --check .
mypy
python -m pytest "$@"
