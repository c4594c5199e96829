#!/usr/bin/env bash
# CI: the README's `make run` from a fresh clone inside a private (0700) directory whose path holds a
# space, without SVC_DATABASE_URL, as a newcomer would (CI runs as root: the embedded PostgreSQL then
# runs as `postgres`, which cannot enter that directory). Starts it, waits until it is ready, logs in
# as admin, stops make with SIGTERM and checks that the server and its PostgreSQL are gone and that
# nothing warned on stderr. Clones the committed HEAD; reuses this checkout's node_modules.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
outer="$(mktemp -d)"
svc="$outer/with space/svc"
makepid=""

cleanup() {
  local status=$?
  if [ -n "$makepid" ] && kill -0 "$makepid" 2>/dev/null; then
    kill -TERM "$makepid" 2>/dev/null || true
    wait "$makepid" 2>/dev/null || true
  fi
  # As root the cluster lives outside the clone, linked from its data directory.
  local cluster
  cluster="$(readlink "$svc/data/postgres" 2>/dev/null || true)"
  if [ -n "$cluster" ]; then rm -rf "$cluster"; fi
  rm -rf "$outer"
  exit "$status"
}
trap cleanup EXIT

fail() {
  echo "embedded start: $*" >&2
  echo "--- stdout" >&2
  cat "$outer/out" >&2 || true
  echo "--- stderr" >&2
  cat "$outer/err" >&2 || true
  exit 1
}

# True while the process runs (a zombie has exited).
running() {
  [ -r "/proc/$1/stat" ] && ! awk '{ sub(/.*\) /, ""); exit ($1 == "Z" ? 0 : 1) }' "/proc/$1/stat" 2>/dev/null
}

mkdir -p "$outer/with space"
chmod 700 "$outer" "$outer/with space"
git clone --quiet "$repo" "$svc"
# A fresh install would download every package again: hard links to this checkout's (a copy across
# file systems), and the install stamp made newer than the clone's package files.
cp -al "$repo/node_modules" "$svc/node_modules" 2>/dev/null || {
  rm -rf "$svc/node_modules"
  cp -a "$repo/node_modules" "$svc/node_modules"
}
touch "$svc/node_modules/.install-stamp"

port="$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')"
password="ci-admin-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
base="http://127.0.0.1:$port"

(
  cd "$svc"
  exec env -u SVC_DATABASE_URL -u DATABASE_URL -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
    SVC_BIND="127.0.0.1:$port" SVC_ADMIN_PASSWORD="$password" make --no-print-directory run >"$outer/out" 2>"$outer/err"
) &
makepid=$!

for _ in $(seq 1 600); do
  grep -q 'stop with .* process [0-9]' "$outer/out" 2>/dev/null && break
  kill -0 "$makepid" 2>/dev/null || fail "make run exited before the service was up"
  sleep 0.2
done
grep -q 'stop with .* process [0-9]' "$outer/out" || fail "the service did not come up within two minutes"

server="$(sed -n 's/.*stop with .* process \([0-9]*\).*/\1/p' "$outer/out")"
cluster="$(sed -n 's/.*data in \(.*\)$/\1/p' "$outer/out")"
[ -f "$cluster/postmaster.pid" ] || fail "no running cluster in $cluster"
postmaster="$(head -n 1 "$cluster/postmaster.pid")"
mapfile -t backends < <(pgrep -P "$postmaster" || true)
[ "${#backends[@]}" -gt 0 ] || fail "the postmaster $postmaster has no child processes"

[ "$(curl -fsS "$base/readyz")" = '{"status":"ready"}' ] || fail "/readyz is not ready"
curl -fsS -X POST "$base/api/v0/auth/login" -H 'content-type: application/json' \
  -d "{\"name\":\"admin\",\"password\":\"$password\"}" | grep -q '"token"' || fail "the admin could not log in"

kill -TERM "$makepid"
wait "$makepid" || true
makepid=""

for pid in "$server" "$postmaster" "${backends[@]}"; do
  if running "$pid"; then fail "process $pid still runs after SIGTERM to make run"; fi
done
[ ! -e "$cluster/postmaster.pid" ] || fail "the embedded PostgreSQL did not shut down cleanly"
grep -q '"msg":"shutting down"' "$outer/out" || fail "the server did not shut down on SIGTERM"
if grep -E 'Warning|start-up failed|shutdown step failed' "$outer/err"; then fail "unexpected output on stderr"; fi
echo "embedded start: make run from a private clone served, logged in and stopped cleanly (as $(id -un))"
