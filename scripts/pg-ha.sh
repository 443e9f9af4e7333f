#!/usr/bin/env bash
# A PostgreSQL high-availability test bed on one machine, all on loopback: a primary, a
# synchronous streaming-replication standby (pg_basebackup -R; the primary runs with
# synchronous_standby_names = '*', so a commit is acknowledged once the standby has
# flushed it) and a PgBouncer in transaction mode in front of the primary.
#
#   scripts/pg-ha.sh start DIR [BASE_PORT]   # primary BASE, standby BASE+1, pgbouncer BASE+2
#   scripts/pg-ha.sh failover DIR            # kill the primary (immediate stop), promote the standby
#   scripts/pg-ha.sh status DIR              # which server is primary, replication state
#   scripts/pg-ha.sh stop DIR                # stop everything (DIR is kept)
#
# `start` prints the URLs to give strata: the multi-host failover URL, the pooler URL and
# the standby as a read replica. BASE_PORT defaults to 55470. Run as root (the servers then
# run as the `postgres` user) or as an ordinary user that owns DIR. The strata-postgres tests
# do the same from Rust (`strata_postgres::testing::HaPair` and `Pgbouncer`), on free ports.
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    sed -n '2,16p' "$0" >&2
    exit 2
fi
base="${3:-55470}"
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
PGBIN="${STRATA_PG_BIN:-$(pg_bin)}"
[ -x "$PGBIN/pg_ctl" ] || { echo "no PostgreSQL server binaries (install postgresql)" >&2; exit 1; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
ports() { cat "$dir/ports"; }

case "$cmd" in
start)
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    p1=$base; p2=$((base + 1)); p3=$((base + 2))
    echo "$p1 $p2 $p3" >"$dir/ports"
    as_pg "$PGBIN/initdb" -D "$dir/primary" -A trust -U postgres >"$dir/initdb.log"
    as_pg "$PGBIN/pg_ctl" -D "$dir/primary" -l "$dir/primary.log" -w -o \
        "-k $dir -h 127.0.0.1 -p $p1 -c synchronous_standby_names='*' -c wal_level=replica" start
    as_pg "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$p1" -U postgres -D "$dir/standby" -R -X stream
    as_pg "$PGBIN/pg_ctl" -D "$dir/standby" -l "$dir/standby.log" -w -o \
        "-k $dir -h 127.0.0.1 -p $p2 -c hot_standby=on" start
    for _ in $(seq 1 600); do
        state="$(as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$p1" -U postgres -Atc \
            "SELECT string_agg(sync_state, ',') FROM pg_stat_replication")"
        [ "$state" = sync ] && break
        sleep 0.1
    done
    [ "$state" = sync ] || { echo "the standby did not become synchronous" >&2; exit 1; }
    if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then
        bouncer="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
        printf '"postgres" ""\n' >"$dir/userlist.txt"
        cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$p1
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $p3
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
ignore_startup_parameters = extra_float_digits,options
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
        [ "$(id -u)" = 0 ] && chown postgres "$dir"/pgbouncer.ini "$dir"/userlist.txt
        as_pg "$bouncer" -d "$dir/pgbouncer.ini"
    else
        echo "no pgbouncer binary: the pooler is not started (apt-get install pgbouncer)" >&2
    fi
    echo "failover URL: postgresql://postgres@127.0.0.1:$p1,127.0.0.1:$p2/postgres?target_session_attrs=read-write"
    echo "pooler URL:   postgresql://postgres@127.0.0.1:$p3/postgres?strata_pooler=transaction&strata_direct=127.0.0.1:$p1"
    echo "replica URL:  postgresql://postgres@127.0.0.1:$p2/postgres"
    ;;
failover)
    read -r p1 p2 _ < <(ports)
    started=$(date +%s.%N)
    as_pg "$PGBIN/pg_ctl" -D "$dir/primary" -m immediate -w stop
    as_pg "$PGBIN/pg_ctl" -D "$dir/standby" -w promote
    echo "promoted 127.0.0.1:$p2 $(echo "$(date +%s.%N) - $started" | bc 2>/dev/null || true)s after the primary's stop"
    ;;
status)
    read -r p1 p2 _ < <(ports)
    for p in $p1 $p2; do
        r="$(as_pg "$PGBIN/psql" -h 127.0.0.1 -p "$p" -U postgres -Atc \
            "SELECT CASE WHEN pg_is_in_recovery() THEN 'standby' ELSE 'primary' END" 2>/dev/null || echo down)"
        echo "127.0.0.1:$p $r"
    done
    ;;
stop)
    if [ -f "$dir/pgbouncer.pid" ]; then kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true; fi
    for node in standby primary; do
        if [ -f "$dir/$node/postmaster.pid" ]; then
            as_pg "$PGBIN/pg_ctl" -D "$dir/$node" -m fast -w stop || true
        fi
    done
    ;;
*)
    sed -n '2,16p' "$0" >&2
    exit 2
    ;;
esac
