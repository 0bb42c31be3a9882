#!/usr/bin/env bash
# A Temporal server with persistence and visibility on PostgreSQL, without Docker: the same
# server version, config file (deploy/temporal-postgres.yaml), dynamic config, schema steps,
# namespace and search attributes as docker-compose.yml's temporal-schema, temporal and
# temporal-namespace services.
#
#   deploy/temporal-postgres.sh start          create/upgrade the databases, start, register, wait
#   deploy/temporal-postgres.sh status         exit 0 when running (prints the address)
#   deploy/temporal-postgres.sh stop [--drop]  SIGTERM, then SIGKILL; --drop also drops the databases
#   deploy/temporal-postgres.sh drop           drop the two databases (the server must be stopped)
#
# Settings (environment):
#   TEMPORAL_PG_HOST, TEMPORAL_PG_PORT, TEMPORAL_PG_USER, TEMPORAL_PG_PASSWORD
#                          PostgreSQL (127.0.0.1, 5432, postgres, empty)
#   TEMPORAL_PG_DB         persistence database (temporal); visibility is <that>_visibility
#   TEMPORAL_PG_PORT_BASE  unset: Temporal's usual ports (frontend 7233, history 7234, matching
#                          7235, worker 7239, HTTP 7243, membership 6933-6939). Set to N: the
#                          server binds N..N+8 only (frontend gRPC on N). N+8 must stay
#                          below 32768: Temporal stores membership ports as smallint.
#   TEMPORAL_PG_STATE_DIR  pid, logs, config (.data/temporal-postgres/<database> in the repo)
#   TEMPORAL_NAMESPACE, TEMPORAL_NAMESPACE_RETENTION   default, 168h
#   TEMPORAL_PG_LOG_LEVEL  server log level (warn)
#   TEMPORAL_PG_START_TIMEOUT  seconds to wait for each readiness step (90)
#   TEMPORAL_SERVER_BIN, TEMPORAL_SQL_TOOL, TEMPORAL_CLI_PATH   binaries (found in Go's bin dir)
set -euo pipefail

# Must match the temporalio/server image tag in docker-compose.yml (test/service/compose.test.ts checks).
TEMPORAL_SERVER_VERSION=1.29.1
# Fixed when the databases are first created; docker-compose.yml sets the same.
NUM_HISTORY_SHARDS=4
# Exactly temporal/search-attributes.ts's SEARCH_ATTRIBUTE_TYPES (test/service/compose.test.ts checks).
SEARCH_ATTRIBUTE_FLAGS=(
  --name ProjectId --type Keyword
  --name ContactId --type Keyword
  --name CampaignId --type Keyword
  --name TidingsWorkflowId --type Keyword
  --name CurrentStep --type Keyword
  --name WaitingForEvent --type Keyword
)

say() { echo "[temporal-postgres] $*" >&2; }
die() { say "error: $*"; exit 1; }

deploy_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_dir=$(dirname "$deploy_dir")

pg_host=${TEMPORAL_PG_HOST:-127.0.0.1}
pg_port=${TEMPORAL_PG_PORT:-5432}
pg_user=${TEMPORAL_PG_USER:-postgres}
pg_password=${TEMPORAL_PG_PASSWORD:-}
db=${TEMPORAL_PG_DB:-temporal}
visibility_db=${db}_visibility
namespace=${TEMPORAL_NAMESPACE:-default}
retention=${TEMPORAL_NAMESPACE_RETENTION:-168h}
log_level=${TEMPORAL_PG_LOG_LEVEL:-warn}
timeout=${TEMPORAL_PG_START_TIMEOUT:-90}
state_dir=${TEMPORAL_PG_STATE_DIR:-$repo_dir/.data/temporal-postgres/$db}

if [[ -n ${TEMPORAL_PG_PORT_BASE:-} ]]; then
  [[ $TEMPORAL_PG_PORT_BASE =~ ^[1-9][0-9]{0,4}$ ]] || die "TEMPORAL_PG_PORT_BASE must be a port number: $TEMPORAL_PG_PORT_BASE"
  (( TEMPORAL_PG_PORT_BASE + 8 < 32768 )) || die "TEMPORAL_PG_PORT_BASE must be below 32760 (Temporal keeps membership ports as smallint): $TEMPORAL_PG_PORT_BASE"
  b=$TEMPORAL_PG_PORT_BASE
  frontend_port=$b history_port=$((b + 1)) matching_port=$((b + 2)) worker_port=$((b + 3)) http_port=$((b + 4))
  frontend_mport=$((b + 5)) history_mport=$((b + 6)) matching_mport=$((b + 7)) worker_mport=$((b + 8))
else
  frontend_port=7233 history_port=7234 matching_port=7235 worker_port=7239 http_port=7243
  frontend_mport=6933 history_mport=6934 matching_mport=6935 worker_mport=6939
fi
all_ports=("$frontend_port" "$history_port" "$matching_port" "$worker_port" "$http_port"
  "$frontend_mport" "$history_mport" "$matching_mport" "$worker_mport")
address=127.0.0.1:$frontend_port

pid_file=$state_dir/server.pid
server_log=$state_dir/server.log
tools_log=$state_dir/tools.log

go_bin_dir() {
  local dir=""
  if command -v go >/dev/null 2>&1; then
    dir=$(go env GOBIN 2>/dev/null || true)
    [[ -n $dir ]] || dir=$(go env GOPATH 2>/dev/null | cut -d: -f1)/bin
  fi
  echo "${dir:-$HOME/go/bin}"
}

find_tools() {
  local bin
  bin=$(go_bin_dir)
  server_bin=${TEMPORAL_SERVER_BIN:-$bin/server}
  sql_tool=${TEMPORAL_SQL_TOOL:-$bin/sql}
  cli=${TEMPORAL_CLI_PATH:-$(command -v temporal || echo "$bin/temporal")}
  [[ -x $server_bin ]] || die "no Temporal server at $server_bin: go install go.temporal.io/server/cmd/server@v$TEMPORAL_SERVER_VERSION"
  [[ -x $sql_tool ]] || die "no temporal-sql-tool at $sql_tool: go install go.temporal.io/server/cmd/tools/sql@v$TEMPORAL_SERVER_VERSION"
  [[ -x $cli ]] || die "no temporal CLI at $cli: go install github.com/temporalio/cli/cmd/temporal@v1.5.1"
}

check_settings() {
  # The tool quotes names when it creates a database but not when it drops one, so only
  # names that PostgreSQL does not fold or need quoting for are safe.
  [[ $db =~ ^[a-z_][a-z0-9_]{0,51}$ ]] || die "TEMPORAL_PG_DB must be lower-case letters, digits and _ (at most 52): $db"
  [[ $timeout =~ ^[0-9]+$ ]] || die "TEMPORAL_PG_START_TIMEOUT must be a number of seconds: $timeout"
  local p
  for p in "${all_ports[@]}"; do
    [[ $p =~ ^[0-9]+$ && $p -ge 1 && $p -le 65535 ]] || die "port out of range: $p (TEMPORAL_PG_PORT_BASE=${TEMPORAL_PG_PORT_BASE:-})"
  done
}

sql_tool_on() { # DATABASE ARGS...
  local target=$1; shift
  "$sql_tool" --plugin postgres12 --ep "$pg_host" -p "$pg_port" -u "$pg_user" --pw "$pg_password" \
    --db "$target" "$@" >>"$tools_log" 2>&1
}

# The same three idempotent steps as docker-compose.yml's temporal-schema job, from the schemas
# built into the tool (so they always match its version).
prepare_databases() {
  local target dir
  for target in "$db" "$visibility_db"; do
    if [[ $target == "$visibility_db" ]]; then dir=visibility; else dir=temporal; fi
    say "database $target: create if missing, bring its schema up to date"
    sql_tool_on "$target" create-database &&
      sql_tool_on "$target" setup-schema -v 0.0 &&
      sql_tool_on "$target" update-schema --schema-name "postgresql/v12/$dir" ||
      { tail -n 20 "$tools_log" >&2; die "schema setup failed for $target (full output: $tools_log)"; }
  done
}

# kill -0 also succeeds for a process that has exited but not been reaped yet.
alive() { kill -0 "$1" 2>/dev/null && [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) != Z ]]; }

running_pid() { # prints the pid when this state dir's server is alive
  [[ -f $pid_file ]] || return 1
  local pid
  pid=$(cat "$pid_file")
  # Guards against a recycled pid: the process must be a server started with this state dir.
  [[ -n $pid ]] && alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--root $state_dir " || return 1
  echo "$pid"
}

port_in_use() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A server of someone else's on the frontend port would otherwise answer the readiness checks.
check_ports_free() {
  local p
  for p in "${all_ports[@]}"; do
    ! port_in_use "$p" || die "port $p is already in use (set TEMPORAL_PG_PORT_BASE to move all of the server's ports)"
  done
}

launch_server() {
  mkdir -p "$state_dir/config"
  cp "$deploy_dir/temporal-postgres.yaml" "$state_dir/config/temporal-postgres.yaml"
  # Every variable deploy/temporal-postgres.yaml reads, so nothing leaks in from the caller's environment.
  export LOG_LEVEL=$log_level NUM_HISTORY_SHARDS=$NUM_HISTORY_SHARDS \
    POSTGRES_SEEDS=$pg_host DB_PORT=$pg_port POSTGRES_USER=$pg_user POSTGRES_PWD=$pg_password \
    DBNAME=$db VISIBILITY_DBNAME=$visibility_db \
    BIND_ON_IP=127.0.0.1 TEMPORAL_BROADCAST_ADDRESS=127.0.0.1 \
    FRONTEND_GRPC_PORT=$frontend_port FRONTEND_HTTP_PORT=$http_port FRONTEND_MEMBERSHIP_PORT=$frontend_mport \
    HISTORY_GRPC_PORT=$history_port HISTORY_MEMBERSHIP_PORT=$history_mport \
    MATCHING_GRPC_PORT=$matching_port MATCHING_MEMBERSHIP_PORT=$matching_mport \
    WORKER_GRPC_PORT=$worker_port WORKER_MEMBERSHIP_PORT=$worker_mport \
    DYNAMIC_CONFIG_FILE_PATH=$deploy_dir/temporal-dynamicconfig.yaml
  # Rendering first turns a template or value error into a message here, and keeps a copy
  # of what the server runs with.
  "$server_bin" --config "$state_dir/config" --env temporal-postgres render-config >"$state_dir/rendered-config.txt" 2>>"$tools_log" ||
    { tail -n 5 "$tools_log" >&2; die "the server rejected its configuration"; }
  echo "--- $(date -u +%FT%TZ) start" >>"$server_log"
  nohup "$server_bin" --root "$state_dir" --config config --env temporal-postgres --allow-no-auth start \
    </dev/null >>"$server_log" 2>&1 &
  echo $! >"$pid_file"
  launched=1
}

fail() { # stops what this call started, shows why
  say "error: $*"
  say "last lines of $tools_log:"
  tail -n 5 "$tools_log" >&2 || true
  say "last lines of $server_log:"
  tail -n 30 "$server_log" >&2 || true
  if [[ -n ${launched:-} ]]; then stop_server >&2 || true; fi
  exit 1
}

# retry DESCRIPTION COMMAND...: once a second until it succeeds, the server dies or time runs out.
retry() {
  local what=$1 deadline=$((SECONDS + timeout)); shift
  until "$@" >>"$tools_log" 2>&1; do
    running_pid >/dev/null || fail "the server exited while waiting for $what"
    ((SECONDS < deadline)) || fail "timed out after ${timeout}s waiting for $what (tool output: $tools_log)"
    sleep 1
  done
}

# Exits 0 only once the frontend's health check says SERVING.
serving() { "$cli" operator cluster health --address "$address"; }

ensure_namespace() {
  "$cli" operator namespace describe --address "$address" --namespace "$namespace" >/dev/null 2>&1 ||
    "$cli" operator namespace create --address "$address" --namespace "$namespace" --retention "$retention"
}

# Registering an attribute that exists with the same type changes nothing.
register_search_attributes() {
  "$cli" operator search-attribute create --address "$address" --namespace "$namespace" "${SEARCH_ATTRIBUTE_FLAGS[@]}"
}

# A query naming every attribute is rejected until the frontend's namespace cache knows them all.
search_attributes_queryable() {
  local query="" flag name=""
  for flag in "${SEARCH_ATTRIBUTE_FLAGS[@]}"; do
    if [[ $name == --name ]]; then query+="${query:+ AND }$flag = 'probe'"; fi
    name=$flag
  done
  "$cli" workflow list --address "$address" --namespace "$namespace" --limit 1 --query "$query"
}

start() {
  check_settings
  find_tools
  mkdir -p "$state_dir"
  local started=$SECONDS pid
  if pid=$(running_pid); then
    say "already running (pid $pid), checking it"
  else
    check_ports_free
    pg_isready_check
    prepare_databases
    launch_server
    say "schemas up to date in $((SECONDS - started)) s; server started (pid $(cat "$pid_file"), log $server_log)"
  fi
  retry "the frontend at $address to be SERVING" serving
  say "SERVING after $((SECONDS - started)) s"
  retry "namespace $namespace" ensure_namespace
  retry "search attributes in $namespace" register_search_attributes
  retry "search attributes to be queryable" search_attributes_queryable
  say "ready in $((SECONDS - started)) s"
  echo "$address"
}

pg_isready_check() {
  (: <"/dev/tcp/$pg_host/$pg_port") 2>/dev/null || die "no PostgreSQL at $pg_host:$pg_port"
}

stop_server() {
  local pid
  if ! pid=$(running_pid); then
    rm -f "$pid_file"
    say "not running"
    return 0
  fi
  kill -TERM "$pid"
  local deadline=$((SECONDS + 20))
  while alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
  if alive "$pid"; then
    say "pid $pid ignored SIGTERM for 20 s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while alive "$pid"; do sleep 0.1; done
  fi
  rm -f "$pid_file"
  say "stopped (pid $pid)"
}

drop_databases() {
  ! running_pid >/dev/null || die "the server is running; stop it first (stop --drop)"
  mkdir -p "$state_dir"
  local target
  for target in "$db" "$visibility_db"; do
    sql_tool_on "$target" drop-database --force || { tail -n 5 "$tools_log" >&2; die "could not drop $target"; }
  done
  say "dropped $db and $visibility_db"
}

status() {
  check_settings
  local pid
  if pid=$(running_pid); then
    say "running (pid $pid)"
    echo "$address"
  else
    say "not running"
    return 3
  fi
}

case "${1:-}" in
  start) start ;;
  stop)
    check_settings
    stop_server
    if [[ ${2:-} == --drop ]]; then find_tools; drop_databases; fi
    ;;
  drop) check_settings; find_tools; drop_databases ;;
  status) status ;;
  *) echo "usage: $0 start | stop [--drop] | drop | status" >&2; exit 2 ;;
esac
