#!/usr/bin/env bash
# The project's test command (README "Run the tests"; .ci/run calls exactly this).
# It installs everything the tests need on a fresh machine: a virtualenv with the
# package and its test extras; the Debian packages prometheus (promtool and the
# server), prometheus-blackbox-exporter, systemd (systemd-analyze) and, when `java`
# or `mvn` is missing, default-jre-headless and maven; the Apache Kafka broker jars
# and console tools from Maven Central; then lint, type-check and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  "${PYTHON:-python3}" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -e '.[test]'

# Debian packages of the deployment tests (tests/deploy/): promtool and the Prometheus
# server (prometheus), the blackbox exporter that probes /readyz and /healthz
# (prometheus-blackbox-exporter), systemd-analyze (systemd); Java and Maven for the
# Kafka broker (tests/connectors/kafka/, scripts/kafka-local.sh; Kafka needs Java 17+,
# Debian 12's default).
debs=()
{ command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; } || debs+=(prometheus)
command -v prometheus-blackbox-exporter >/dev/null 2>&1 || debs+=(prometheus-blackbox-exporter)
command -v systemd-analyze >/dev/null 2>&1 || debs+=(systemd)
command -v java >/dev/null 2>&1 || debs+=(default-jre-headless)
command -v mvn >/dev/null 2>&1 || debs+=(maven)
if [ "${#debs[@]}" -gt 0 ]; then
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
fi

if [ -f scripts/kafka_jars.sh ]; then
  bash scripts/kafka_jars.sh
fi
# the broker's console tools for scripts/kafka-local.sh (tests/deploy/test_kafka_local.py)
bash scripts/kafka-local.sh jars >/dev/null

ruff check .
ruff format --check .
mypy
# Everything, including the tests marked kafka and slow; the fast local suite is
# python -m pytest -m "not kafka and not slow" (CONTRIBUTING.md).
python -m pytest "$@"
