#!/usr/bin/env bash
# Real frameworks behind Peel (issue 33): a FastAPI app under uvicorn, a Flask app under werkzeug's
# run_simple and a Django REST framework app under Django's runserver (scripts/frameworks/), each
# with its own Peel (`--dialect rest`, or PEEL_DIALECT_ARGS). scripts/frameworks/check.py calls every
# endpoint directly and through Peel: 2xx bodies byte for byte, failures as problems member by member
# against what the contract derives from the direct answer. Loopback only; every wait is bounded.
set -uo pipefail
PEEL=${1:?usage: frameworks.sh PATH/TO/peel}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
START=$(date +%s%N)
DIALECT_ARGS=${PEEL_DIALECT_ARGS:---dialect rest}

VENV=${FRAMEWORKS_VENV:-$HERE/../.build/venv-frameworks}
if ! "$VENV/bin/python" -c 'import fastapi, uvicorn, flask, django, rest_framework' 2>/dev/null; then
  echo "preparing $VENV (fastapi, uvicorn, flask, django, djangorestframework)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || { echo "frameworks: cannot create $VENV"; exit 1; }
  "$VENV/bin/pip" install -q --disable-pip-version-check fastapi uvicorn flask django djangorestframework \
    || { echo "frameworks: pip failed"; exit 1; }
fi
PY="$VENV/bin/python"
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ beside the apps
"$PY" -c 'import importlib.metadata as m; print("versions:", ", ".join(f"{p} {m.version(p)}" for p in
  ("fastapi", "pydantic", "uvicorn", "flask", "werkzeug", "django", "djangorestframework")))'

FA=$(free_port); FL=$(free_port); DJ=$(free_port)
(cd "$HERE/frameworks" && exec "$PY" -m uvicorn fastapi_app:app --host 127.0.0.1 --port "$FA" --no-access-log) >"$WORK/fastapi.log" 2>&1 & pids+=($!)
(cd "$HERE/frameworks" && exec "$PY" flask_app.py "$FL") >"$WORK/flask.log" 2>&1 & pids+=($!)
(cd "$HERE/frameworks" && exec "$PY" drf_app.py "$DJ") >"$WORK/drf.log" 2>&1 & pids+=($!)

# start_peel NAME APP_PORT PROBE_PATH: one Peel for the app; sets GW to its listening port.
start_peel() {
  GW=$(free_port); local admin pid; admin=$(free_port)
  # shellcheck disable=SC2086  # the dialect arguments are words
  "$PEEL" --upstream "http://127.0.0.1:$2" --listen "127.0.0.1:$GW" --admin-listen "127.0.0.1:$admin" \
    --workers 1 --access-log json --probe-path "$3" $DIALECT_ARGS >"$WORK/$1.access.log" 2>"$WORK/$1.peel.err" & pid=$!
  pids+=($pid)
  # A Peel that refuses its arguments exits at once: say so rather than wait for its port.
  for _ in $(seq 1 200); do
    listens_on "$admin" "$pid" && return 0
    kill -0 "$pid" 2>/dev/null || { check "$1: Peel starts with $DIALECT_ARGS" "running" "$(head -c 300 "$WORK/$1.peel.err")"; return 1; }
    sleep 0.05
  done
  check "$1: Peel listens within 10 s" "yes" "no"
}
for port in "$FA" "$FL" "$DJ"; do wait_listening "$port"; done
start_peel fastapi "$FA" /items; GW_FA=$GW
start_peel flask "$FL" /users; GW_FL=$GW
start_peel drf "$DJ" /books; GW_DJ=$GW

while IFS=$'\t' read -r name expected actual; do
  check "$name" "$expected" "$actual"
done < <(cd "$HERE/frameworks" && timeout 60 "$PY" check.py \
  "fastapi:$FA:$GW_FA:$WORK/fastapi.access.log" "flask:$FL:$GW_FL:$WORK/flask.access.log" "drf:$DJ:$GW_DJ:$WORK/drf.access.log"
  rc=$?; printf 'the checker ends on its own\t0\t%s\n' "$rc")

echo "$pass passed, $fail failed ($(( ($(date +%s%N) - START) / 1000000 )) ms, Peel with $DIALECT_ARGS)"
exit $(( fail > 0 ))
