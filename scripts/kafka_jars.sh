#!/usr/bin/env bash
# Fetch the Apache Kafka broker (KRaft) jars from Maven Central into a cache ignored
# by git, for the Kafka integration tests (tests/connectors/kafka/) and benchmarks.
#
#   bash scripts/kafka_jars.sh            # prints the jar directory
#   KAFKA_VERSION=4.3.1 bash scripts/kafka_jars.sh
#
# Idempotent: once the directory holds the jars and its .complete marker, it
# returns at once without touching the network. The published kafka_2.13 pom has
# no logging backend, so log4j2 (api, core, slf4j binding) is added here.
set -euo pipefail
cd "$(dirname "$0")/.."

# Kafka 4.3.x: the newest line kafka-python 3.0.x is tested against.
KAFKA_VERSION="${KAFKA_VERSION:-4.3.1}"
LOG4J_VERSION="${LOG4J_VERSION:-2.24.3}"
DEST="${STREAM_NB_KAFKA_JARS:-.cache/kafka/${KAFKA_VERSION}}"

if [ -f "${DEST}/.complete" ]; then
  echo "${DEST}"
  exit 0
fi

command -v mvn >/dev/null 2>&1 || { echo "kafka_jars.sh: Maven (mvn) is required" >&2; exit 1; }
command -v java >/dev/null 2>&1 || { echo "kafka_jars.sh: Java 17+ is required" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
cat >"${work}/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>stream-nb</groupId>
  <artifactId>kafka-test-broker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>${KAFKA_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-api</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>${LOG4J_VERSION}</version>
    </dependency>
  </dependencies>
</project>
POM

mkdir -p "${DEST}.tmp"
mvn -q -B -f "${work}/pom.xml" dependency:copy-dependencies \
  -DoutputDirectory="$(cd "${DEST}.tmp" && pwd)" -DincludeScope=runtime >&2
rm -rf "${DEST}"
mv "${DEST}.tmp" "${DEST}"
touch "${DEST}/.complete"
echo "${DEST}"
