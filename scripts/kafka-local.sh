#!/usr/bin/env bash
# A local single-node Apache Kafka (KRaft) broker for trying stream-nb on Kafka.
# Needs bash, Java 17+ and, the first time only, Maven (to fetch the jars); not
# the project's virtualenv.
#
#   bash scripts/kafka-local.sh start                  # prints the bootstrap address
#   bash scripts/kafka-local.sh create-topic events 3  # a topic with 3 partitions
#   stream-nb demo --limit 1000 | bash scripts/kafka-local.sh produce events
#   bash scripts/kafka-local.sh consume predictions --max-messages 10
#   bash scripts/kafka-local.sh status
#   bash scripts/kafka-local.sh stop
#
# Commands:
#   start                        start the broker in the background (formatting its
#                                data directory the first time) and wait until it
#                                serves; prints host:port. Already running: prints it.
#                                Interrupted before the broker serves (Ctrl-C,
#                                SIGTERM), it stops the broker again.
#   stop                         graceful shutdown (SIGTERM, the broker flushes and
#                                closes its logs), SIGKILL only after 120 s
#   status                       exit 0 and print the address when running, else 3
#   bootstrap                    print host:port
#   jars                         fetch the jars if needed and print the classpath
#   create-topic NAME [PARTITIONS]   create a topic (default 1 partition); no-op if
#                                it exists. The broker does not create topics on
#                                first use: a typo fails instead of making a
#                                one-partition topic.
#   topics                       list the topics
#   produce TOPIC [ARGS...]      one record per stdin line (Kafka's ConsoleProducer;
#                                ARGS go to it, e.g. --reader-property
#                                parse.key=true); the topic must exist
#   consume TOPIC [ARGS...]      print the topic's records from the beginning
#                                (ConsoleConsumer; e.g. --max-messages 10,
#                                --timeout-ms 10000, --isolation-level read_committed)
#
# Options (before the command) and environment:
#   --data-dir DIR   STREAM_NB_KAFKA_DATA_DIR  where the broker keeps its data, log
#                    and settings (default ~/.local/share/stream-nb/kafka); kept
#                    across stops and restarts; delete it to start afresh
#   --port N         STREAM_NB_KAFKA_PORT             client port (default 9092)
#   --controller-port N  STREAM_NB_KAFKA_CONTROLLER_PORT  KRaft controller port (9093)
#                    Ports are fixed when the data directory is first formatted.
#   STREAM_NB_KAFKA_HEAP   broker heap (default 512m)
#   KAFKA_VERSION          Apache Kafka release of the jars (default: scripts/kafka_jars.sh's)
#
# The broker and its tools come from the same Maven Central release: the broker
# jars through scripts/kafka_jars.sh, plus org.apache.kafka:kafka-tools (console
# producer/consumer, topic command) fetched once next to them.
set -euo pipefail

REPO="$(cd -P "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
PROG="kafka-local.sh"
STOP_TIMEOUT=120
START_TIMEOUT="${STREAM_NB_KAFKA_START_TIMEOUT:-120}"

die() {
  echo "${PROG}: $*" >&2
  exit 1
}

# Paths removed when the script exits, however it exits (an EXIT trap also runs on
# SIGTERM and SIGINT).
CLEANUP=()
cleanup() {
  local path
  for path in ${CLEANUP[@]+"${CLEANUP[@]}"}; do
    rm -rf "${path}"
  done
}
trap cleanup EXIT

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}

DATA_DIR="${STREAM_NB_KAFKA_DATA_DIR:-${XDG_DATA_HOME:-${HOME}/.local/share}/stream-nb/kafka}"
PORT="${STREAM_NB_KAFKA_PORT:-}"
CONTROLLER_PORT="${STREAM_NB_KAFKA_CONTROLLER_PORT:-}"
HEAP="${STREAM_NB_KAFKA_HEAP:-512m}"

while [ $# -gt 0 ]; do
  case "$1" in
    --data-dir) [ $# -ge 2 ] || die "--data-dir needs a directory"; DATA_DIR="$2"; shift 2 ;;
    --data-dir=*) DATA_DIR="${1#*=}"; shift ;;
    --port) [ $# -ge 2 ] || die "--port needs a number"; PORT="$2"; shift 2 ;;
    --port=*) PORT="${1#*=}"; shift ;;
    --controller-port) [ $# -ge 2 ] || die "--controller-port needs a number"; CONTROLLER_PORT="$2"; shift 2 ;;
    --controller-port=*) CONTROLLER_PORT="${1#*=}"; shift ;;
    -h|--help|help) usage; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option $1 (try --help)" ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { usage >&2; exit 2; }
COMMAND="$1"
shift

for value in "${PORT}" "${CONTROLLER_PORT}"; do
  case "${value}" in
    '') ;;
    [1-9]|[1-9][0-9]|[1-9][0-9][0-9]|[1-9][0-9][0-9][0-9]|[1-9][0-9][0-9][0-9][0-9])
      [ "${value}" -le 65535 ] || die "a port must be a number in 1..65535, got '${value}'" ;;
    *) die "a port must be a number in 1..65535, got '${value}'" ;;
  esac
done

DATA_DIR="$(realpath -m "${DATA_DIR}")"
CONFIG="${DATA_DIR}/server.properties"
PID_FILE="${DATA_DIR}/broker.pid"
LOG="${DATA_DIR}/broker.log"

# ------------------------------------------------------------------ jars
jar_dirs() {
  local jars tools version
  jars="$(bash "${REPO}/scripts/kafka_jars.sh")" || die "cannot fetch the Kafka jars (scripts/kafka_jars.sh failed)"
  case "${jars}" in /*) ;; *) jars="${REPO}/${jars}" ;; esac
  version="$(basename "$(ls "${jars}"/kafka_2.13-*.jar)" .jar)"
  version="${version#kafka_2.13-}"
  tools="${jars}-tools"
  if [ ! -f "${tools}/.complete" ]; then
    command -v mvn >/dev/null 2>&1 || die "Maven (mvn) is required once, to fetch kafka-tools ${version}"
    rm -rf "${tools}.tmp.$$"
    CLEANUP+=("${tools}.tmp.$$")
    mkdir -p "${tools}.tmp.$$"
    # The tools jar alone: its dependencies are the broker's, already in ${jars}.
    mvn -q -B -Dstyle.color=never dependency:copy -Dartifact="org.apache.kafka:kafka-tools:${version}" \
      -DoutputDirectory="${tools}.tmp.$$" >&2 || { rm -rf "${tools}.tmp.$$"; die "cannot fetch org.apache.kafka:kafka-tools:${version}"; }
    touch "${tools}.tmp.$$/.complete"
    if ! mv -T "${tools}.tmp.$$" "${tools}" 2>/dev/null; then
      rm -rf "${tools}.tmp.$$"  # another run finished first
    fi
  fi
  CLASSPATH_JARS="${jars}/*:${tools}/*"
}

java_cmd() {  # java_cmd HEAP [JVM OPTIONS] MAIN ARGS...: the command line of one JVM
  local heap="$1"
  shift
  # java.io.tmpdir follows TMPDIR (Java itself ignores it); no hsperfdata files
  JAVA_CMD=(java "-Xmx${heap}" -XX:+UseSerialGC -XX:-UsePerfData "-Djava.io.tmpdir=${TMPDIR:-/tmp}"
    "-Dlog4j2.configurationFile=${DATA_DIR}/log4j2.properties"
    -cp "${CLASSPATH_JARS}" "$@")
}

tool() {  # tool MAIN ARGS...: run one of Kafka's command-line tools in the foreground
  jar_dirs
  write_log_config
  # short-lived: the quick (C1) compiler only
  java_cmd 256m -XX:TieredStopAtLevel=1 "$@"
  "${JAVA_CMD[@]}"
}

write_log_config() {
  [ -f "${DATA_DIR}/log4j2.properties" ] && return 0
  cat >"${DATA_DIR}/log4j2.properties" <<'LOG4J'
status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
logger.raft.name = kafka.server.KafkaRaftServer
logger.raft.level = INFO
logger.broker.name = kafka.server.BrokerServer
logger.broker.level = INFO
LOG4J
}

# ------------------------------------------------------------------ state
setting() {  # setting KEY: a value of server.properties
  sed -n "s/^$1=//p" "${CONFIG}" 2>/dev/null | head -n 1
}

bootstrap() {
  local listeners
  listeners="$(setting listeners)"
  listeners="${listeners#PLAINTEXT://}"
  echo "${listeners%%,*}"
}

running_pid() {  # prints the broker's pid if it is running, else nothing (exit 1)
  local pid
  [ -f "${PID_FILE}" ] || return 1
  pid="$(cat "${PID_FILE}")"
  case "${pid}" in ''|*[!0-9]*) return 1 ;; esac
  # the pid must still be this data directory's broker, not a recycled pid
  if [ -r "/proc/${pid}/cmdline" ] && tr '\0' ' ' <"/proc/${pid}/cmdline" | grep -qF "${CONFIG}"; then
    echo "${pid}"
    return 0
  fi
  return 1
}

port_open() {  # port_open HOST PORT
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

write_config() {
  local port="${PORT:-9092}" controller="${CONTROLLER_PORT:-9093}"
  if [ -f "${CONFIG}" ]; then
    local old old_controller
    old="$(bootstrap)"
    old="${old##*:}"
    old_controller="$(setting controller.quorum.bootstrap.servers)"
    old_controller="${old_controller##*:}"
    if { [ -n "${PORT}" ] && [ "${PORT}" != "${old}" ]; } ||
      { [ -n "${CONTROLLER_PORT}" ] && [ "${CONTROLLER_PORT}" != "${old_controller}" ]; }; then
      die "${DATA_DIR} was formatted for ports ${old} (client) and ${old_controller} (controller); start without --port/--controller-port, or use another --data-dir"
    fi
    return 0
  fi
  [ "${port}" != "${controller}" ] || die "the client and controller ports must differ (both ${port})"
  cat >"${CONFIG}.tmp" <<PROPS
# Written by scripts/kafka-local.sh; a single node that is broker and controller.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:${controller}
listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controller}
advertised.listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controller}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=${DATA_DIR}/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
group.initial.rebalance.delay.ms=0
PROPS
  mv "${CONFIG}.tmp" "${CONFIG}"
}

cluster_id() {  # a random base64url UUID, as `kafka-storage.sh random-uuid` prints
  local id
  # one that starts with "-" would be read as an option by StorageTool
  while id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"; [ "${id:0:1}" = "-" ]; do :; done
  printf '%s\n' "${id}"
}

# ------------------------------------------------------------------ commands
terminate() {  # terminate PID SECONDS: SIGTERM, then SIGKILL after SECONDS
  local waited=0
  kill -TERM "$1" 2>/dev/null || return 0
  while kill -0 "$1" 2>/dev/null; do
    if [ "${waited}" -ge $(($2 * 5)) ]; then
      echo "${PROG}: no clean shutdown after $2 s; sending SIGKILL" >&2
      kill -KILL "$1" 2>/dev/null || true
      return 0
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
}

abort_start() {  # abort_start SIGNAL: an interrupted start leaves no broker behind
  trap - INT TERM HUP
  # $!: the broker is the only background job of `start` (unset before it is launched)
  local pid="${!:-}"
  if [ -n "${pid}" ]; then
    echo "${PROG}: start interrupted (SIG$1); stopping the broker it launched" >&2
    terminate "${pid}" "${STOP_TIMEOUT}"
  else
    echo "${PROG}: start interrupted (SIG$1)" >&2
  fi
  rm -f "${PID_FILE}"
  case "$1" in INT) exit 130 ;; HUP) exit 129 ;; *) exit 143 ;; esac
}

cmd_start() {
  mkdir -p "${DATA_DIR}"
  exec 9>"${DATA_DIR}/.lock"
  # a second start waits for the first, then finds the broker running
  flock -w "$((START_TIMEOUT + 10))" 9 || die "another ${PROG} holds ${DATA_DIR}/.lock"
  local pid
  if pid="$(running_pid)"; then
    echo "${PROG}: already running (pid ${pid})" >&2
    bootstrap
    return 0
  fi
  rm -f "${PID_FILE}"
  write_config
  write_log_config
  jar_dirs
  local address host port
  address="$(bootstrap)"
  host="${address%:*}"
  port="${address##*:}"
  if port_open "${host}" "${port}"; then
    die "port ${port} is already in use by another program; pick another with --port on a new --data-dir"
  fi
  if [ ! -f "${DATA_DIR}/data/meta.properties" ]; then
    java_cmd 256m -XX:TieredStopAtLevel=1 kafka.tools.StorageTool format --standalone --ignore-formatted \
      -t "$(cluster_id)" -c "${CONFIG}"
    "${JAVA_CMD[@]}" >>"${LOG}" 2>&1 || die "formatting ${DATA_DIR}/data failed; see ${LOG}"
  fi
  java_cmd "${HEAP}" kafka.Kafka "${CONFIG}"
  JAVA_CMD=("${JAVA_CMD[0]}" "-Xms${HEAP}" "${JAVA_CMD[@]:1}")
  # the log is appended to across starts: wait for this start's line only
  local logged=0
  [ ! -f "${LOG}" ] || logged="$(wc -c <"${LOG}")"
  # A session of its own: once started, the broker outlives this terminal and the
  # calling shell; `stop` ends it. Until it serves, an interrupted start (SIGINT,
  # SIGTERM, SIGHUP) stops it again. (A start run in the background ignores
  # Ctrl-C, as every background job does.)
  trap "abort_start INT" INT
  trap "abort_start TERM" TERM
  trap "abort_start HUP" HUP
  setsid "${JAVA_CMD[@]}" </dev/null >>"${LOG}" 2>&1 9>&- &
  pid=$!
  echo "${pid}" >"${PID_FILE}"
  local waited=0
  # (grep reads all of tail's output: no SIGPIPE to fail the pipeline under pipefail)
  until tail -c +"$((logged + 1))" "${LOG}" 2>/dev/null | grep "Kafka Server started" >/dev/null &&
    port_open "${host}" "${port}"; do
    if ! kill -0 "${pid}" 2>/dev/null; then
      rm -f "${PID_FILE}"
      tail -n 30 "${LOG}" >&2
      die "the broker exited during start-up; its log is ${LOG}"
    fi
    if [ "${waited}" -ge $((START_TIMEOUT * 5)) ]; then
      trap - INT TERM HUP
      tail -n 30 "${LOG}" >&2
      terminate "${pid}" "${STOP_TIMEOUT}"
      rm -f "${PID_FILE}"
      die "the broker did not start within ${START_TIMEOUT} s; its log is ${LOG}"
    fi
    sleep 0.2
    waited=$((waited + 1))
  done
  trap - INT TERM HUP
  echo "${PROG}: broker running (pid ${pid}), data in ${DATA_DIR}" >&2
  bootstrap
}

cmd_stop() {
  if [ ! -d "${DATA_DIR}" ]; then
    echo "${PROG}: not running (no data directory ${DATA_DIR})" >&2
    return 0
  fi
  exec 9>"${DATA_DIR}/.lock"
  flock -w "$((STOP_TIMEOUT + 10))" 9 || die "another ${PROG} holds ${DATA_DIR}/.lock"
  local pid
  if ! pid="$(running_pid)"; then
    rm -f "${PID_FILE}"
    echo "${PROG}: not running" >&2
    return 0
  fi
  terminate "${pid}" "${STOP_TIMEOUT}"
  rm -f "${PID_FILE}"
  echo "${PROG}: stopped" >&2
}

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    echo "${PROG}: running (pid ${pid}), data in ${DATA_DIR}" >&2
    bootstrap
    return 0
  fi
  echo "${PROG}: not running (data directory ${DATA_DIR})" >&2
  return 3
}

need_running() {
  running_pid >/dev/null || die "the broker is not running; start it with: bash scripts/kafka-local.sh start"
}

need_topic() {  # need_topic NAME: fail at once instead of a console tool's minute of retries
  local waited=0
  # partition 0's directory appears as soon as the broker has the topic
  until [ -d "${DATA_DIR}/data/$1-0" ]; do
    [ "${waited}" -lt 10 ] ||
      die "topic '$1' does not exist (this broker creates no topic on first use); create it with: bash scripts/kafka-local.sh create-topic $1 PARTITIONS"
    sleep 0.2
    waited=$((waited + 1))
  done
}

case "${COMMAND}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  jars)
    jar_dirs
    echo "${CLASSPATH_JARS}" ;;
  bootstrap)
    [ -f "${CONFIG}" ] || die "no broker in ${DATA_DIR} yet; run: bash scripts/kafka-local.sh start"
    bootstrap ;;
  create-topic)
    [ $# -ge 1 ] || die "usage: ${PROG} create-topic NAME [PARTITIONS]"
    partitions="${2:-1}"
    case "${partitions}" in ''|*[!0-9]*|0) die "PARTITIONS must be a positive number, got '${partitions}'" ;; esac
    need_running
    tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$(bootstrap)" --create \
      --if-not-exists --topic "$1" --partitions "${partitions}" --replication-factor 1 ;;
  topics)
    need_running
    tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$(bootstrap)" --list ;;
  produce)
    [ $# -ge 1 ] || die "usage: ${PROG} produce TOPIC [ConsoleProducer options] < lines"
    need_running
    topic="$1"
    shift
    need_topic "${topic}"
    tool org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$(bootstrap)" \
      --topic "${topic}" "$@" ;;
  consume)
    [ $# -ge 1 ] || die "usage: ${PROG} consume TOPIC [ConsoleConsumer options]"
    need_running
    topic="$1"
    shift
    need_topic "${topic}"
    tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$(bootstrap)" \
      --topic "${topic}" --from-beginning "$@" ;;
  *) die "unknown command '${COMMAND}' (try --help)" ;;
esac
