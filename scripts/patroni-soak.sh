#!/usr/bin/env bash
# A Patroni + etcd cluster on one machine, all on loopback, for strata's opt-in failover
# soak (issue 28): one etcd, three Patroni nodes (synchronous_mode, pg_rewind), each
# running a PostgreSQL server from the distribution's packages.
#
#   scripts/patroni-soak.sh install              # apt-get install patroni etcd-server (Debian)
#   scripts/patroni-soak.sh start DIR [BASE]     # etcd BASE/BASE+1, PostgreSQL BASE+11.., REST BASE+21..
#   scripts/patroni-soak.sh leader DIR           # the leader's node name and PostgreSQL port
#   scripts/patroni-soak.sh kill-leader DIR      # SIGKILL the leader's Patroni and PostgreSQL,
#                                                #  wait for a new leader, restart the old node
#   scripts/patroni-soak.sh stop DIR             # stop everything (DIR is kept)
#   scripts/patroni-soak.sh soak                 # run the strata soak test against it
#
# `start` prints `url=…`: the multi-host URL to give strata (target_session_attrs=read-write
# over the three servers). BASE defaults to 24300. Run as root (Patroni and the servers
# then run as the `postgres` user). The soak (`soak`, or by hand:
# `STRATA_PATRONI_SOAK=1 STRATA_PG_URL=… cargo test --release -p strata-cli --test it -- \
# pg_patroni_soak --nocapture`) starts its own cluster with this script, runs several strata
# processes (collection updates through write sets, sync apply) while killing the leader
# repeatedly, and checks that no acknowledged write was lost and every count is exact.
set -euo pipefail

cmd="${1:-}"
here="$(cd "$(dirname "$0")" && pwd)"
usage() { sed -n '2,20p' "$0" >&2; exit 2; }
[ -n "$cmd" ] || usage

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
nodes="1 2 3"

case "$cmd" in
install)
    apt-get install -y patroni etcd-server
    exit 0
    ;;
soak)
    cd "$here/.."
    export STRATA_PATRONI_SOAK=1
    export STRATA_PG_URL="${STRATA_PG_URL:-postgresql://postgres@127.0.0.1:55432/postgres}"
    exec cargo test --release -p strata-cli --test it -- pg_patroni_soak --nocapture
    ;;
esac

dir="${2:-}"
[ -n "$dir" ] || usage
base_of() { cat "$dir/base"; }
pg_port() { echo $(( $(base_of) + 10 + $1 )); }
rest_port() { echo $(( $(base_of) + 20 + $1 )); }

# The node whose REST API answers 200 on /primary (the leader), or nothing.
leader_node() {
    for n in $nodes; do
        code="$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$(rest_port "$n")/primary" || true)"
        if [ "$code" = 200 ]; then echo "$n"; return 0; fi
    done
    return 1
}

# Waits (up to $2 s) until a leader other than $1 ("" = any) runs with a synchronous standby.
wait_leader() {
    not="$1"; deadline=$(( $(date +%s) + $2 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        if n="$(leader_node)" && [ "$n" != "$not" ]; then
            sync="$(as_pg "$(pg_bin)/psql" -h 127.0.0.1 -p "$(pg_port "$n")" -U postgres -Atc \
                "SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync','quorum')" 2>/dev/null || true)"
            if [ "${sync:-0}" -ge 1 ]; then echo "$n"; return 0; fi
        fi
        sleep 0.2
    done
    return 1
}

start_node() {
    n="$1"
    as_pg bash -c "nohup patroni '$dir/node$n.yml' >>'$dir/node$n.log' 2>&1 & echo \$! >'$dir/node$n.pid'"
}

case "$cmd" in
start)
    command -v patroni >/dev/null && command -v etcd >/dev/null ||
        { echo "patroni and etcd are not installed: scripts/patroni-soak.sh install" >&2; exit 1; }
    PGBIN="${STRATA_PG_BIN:-$(pg_bin)}"
    [ -x "$PGBIN/pg_ctl" ] || { echo "no PostgreSQL server binaries (install postgresql)" >&2; exit 1; }
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    echo "${3:-24300}" >"$dir/base"
    base="$(base_of)"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    nohup etcd --name soak --data-dir "$dir/etcd" \
        --listen-client-urls "http://127.0.0.1:$base" --advertise-client-urls "http://127.0.0.1:$base" \
        --listen-peer-urls "http://127.0.0.1:$((base + 1))" \
        --initial-advertise-peer-urls "http://127.0.0.1:$((base + 1))" \
        --initial-cluster "soak=http://127.0.0.1:$((base + 1))" \
        >"$dir/etcd.log" 2>&1 &
    echo $! >"$dir/etcd.pid"
    for n in $nodes; do
        cat >"$dir/node$n.yml" <<YML
scope: strata-soak
name: node$n
restapi:
  listen: 127.0.0.1:$(rest_port "$n")
  connect_address: 127.0.0.1:$(rest_port "$n")
etcd3:
  hosts: 127.0.0.1:$base
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      remove_data_directory_on_rewind_failure: true
      remove_data_directory_on_diverged_timelines: true
      parameters:
        wal_level: replica
        wal_log_hints: 'on'
        hot_standby: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 100
  initdb:
  - auth: trust
  - username: postgres
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$(pg_port "$n")
  connect_address: 127.0.0.1:$(pg_port "$n")
  data_dir: $dir/node$n/data
  bin_dir: $PGBIN
  pgpass: $dir/node$n/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: '$dir/node$n'
YML
        mkdir -p "$dir/node$n"
        [ "$(id -u)" = 0 ] && chown -R postgres "$dir/node$n" "$dir/node$n.yml"
        chmod 0700 "$dir/node$n"
    done
    # etcd first (Patroni retries, but a quiet start is easier to read).
    for _ in $(seq 1 100); do
        curl -s -m 1 "http://127.0.0.1:$base/version" >/dev/null && break
        sleep 0.1
    done
    [ "$(id -u)" = 0 ] && touch "$dir/node1.log" "$dir/node2.log" "$dir/node3.log" && chown postgres "$dir"/node*.log
    start_node 1
    # The first node bootstraps the cluster (a leader without a standby yet).
    for _ in $(seq 1 1200); do leader_node >/dev/null && break; sleep 0.1; done
    # The first node bootstraps; the others clone it.
    start_node 2
    start_node 3
    leader="$(wait_leader "" 180)" || { echo "no leader with a synchronous standby within 180 s; see $dir/node*.log" >&2; exit 1; }
    # Both replicas streaming (the soak kills leaders; each needs a candidate).
    deadline=$(( $(date +%s) + 180 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        streaming="$(as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$(pg_port "$leader")" -U postgres -Atc \
            "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null || echo 0)"
        [ "$streaming" -ge 2 ] && break
        sleep 0.2
    done
    hosts=""
    for n in $nodes; do hosts="$hosts${hosts:+,}127.0.0.1:$(pg_port "$n")"; done
    echo "leader=node$leader"
    echo "url=postgresql://postgres@$hosts/postgres?target_session_attrs=read-write"
    ;;
leader)
    n="$(leader_node)" || { echo "no leader" >&2; exit 1; }
    echo "node$n $(pg_port "$n")"
    ;;
kill-leader)
    n="$(leader_node)" || { echo "no leader" >&2; exit 1; }
    # The node dies as a machine would: Patroni and its PostgreSQL, SIGKILL, no shutdown.
    pm="$(head -n 1 "$dir/node$n/data/postmaster.pid" 2>/dev/null || true)"
    kill -9 "$(cat "$dir/node$n.pid")" 2>/dev/null || true
    [ -n "$pm" ] && kill -9 "$pm" 2>/dev/null || true
    killed_at="$(date +%s.%N)"
    new="$(wait_leader "$n" 120)" || { echo "no new leader within 120 s; see $dir/node*.log" >&2; exit 1; }
    promoted_at="$(date +%s.%N)"
    # The old node comes back as a replica (pg_rewind, or a fresh clone).
    for _ in $(seq 1 100); do
        [ -f "$dir/node$n/data/postmaster.pid" ] || break
        # Whatever the postmaster's children left: wait for the last to go.
        pgrep -f "$dir/node$n/data" >/dev/null || break
        sleep 0.1
    done
    rm -f "$dir/node$n/data/postmaster.pid"
    start_node "$n"
    # Back to two streaming replicas before the next kill (each needs a candidate).
    deadline=$(( $(date +%s) + 180 ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        streaming="$(as_pg "$(pg_bin)/psql" -h 127.0.0.1 -p "$(pg_port "$new")" -U postgres -Atc \
            "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null || echo 0)"
        [ "$streaming" -ge 2 ] && break
        sleep 0.2
    done
    echo "killed=node$n leader=node$new seconds=$(echo "$promoted_at - $killed_at" | bc) replicas=$streaming"
    ;;
stop)
    for n in $nodes; do
        [ -f "$dir/node$n.pid" ] && kill "$(cat "$dir/node$n.pid")" 2>/dev/null || true
    done
    for n in $nodes; do
        for _ in $(seq 1 100); do
            [ -f "$dir/node$n.pid" ] && kill -0 "$(cat "$dir/node$n.pid")" 2>/dev/null || break
            sleep 0.1
        done
        [ -f "$dir/node$n/data/postmaster.pid" ] &&
            as_pg "$(pg_bin)/pg_ctl" -D "$dir/node$n/data" -m immediate stop >/dev/null 2>&1 || true
    done
    [ -f "$dir/etcd.pid" ] && kill "$(cat "$dir/etcd.pid")" 2>/dev/null || true
    ;;
*)
    usage
    ;;
esac
