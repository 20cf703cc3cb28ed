#!/usr/bin/env bash
# `peel openapi` against real-shaped documents (issue 34): springdoc's yudao CommonResult, springfox
# 2.0's RuoYi AjaxResult/TableDataInfo, a WeChat-style rest-of-object API and a real FastAPI app's
# own document; every output validated by openapi-spec-validator (scripts/openapi/check.py).
set -uo pipefail
PEEL=${1:?usage: openapi.sh PATH/TO/peel}
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${OPENAPI_VENV:-$HERE/../.build/venv-openapi}
source "$HERE/lib.sh"
if ! "$VENV/bin/python" -c 'import openapi_spec_validator, fastapi, uvicorn, schemathesis, openapi_python_client, yaml' 2>/dev/null; then
  echo "preparing $VENV (openapi-spec-validator, fastapi, uvicorn, schemathesis, openapi-python-client, pyyaml)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || { echo "openapi: cannot create $VENV"; exit 1; }
  "$VENV/bin/pip" install -q --disable-pip-version-check openapi-spec-validator fastapi uvicorn schemathesis openapi-python-client pyyaml \
    || { echo "openapi: pip failed"; exit 1; }
fi
PY="$VENV/bin/python"
export PYTHONDONTWRITEBYTECODE=1
"$PY" -c 'import importlib.metadata as m; print("versions:", ", ".join(f"{p} {m.version(p)}" for p in
  ("openapi-spec-validator", "fastapi", "pydantic", "schemathesis", "openapi-python-client")))'
"$PY" "$HERE/openapi/check.py" "$PEEL" "$HERE/frameworks" || fail=$((fail+1))

# Live: a yudao-style FastAPI backend, Peel in front of it with --dialect yudao, and Peel's document
# of it judged by a generated client and by schemathesis.
UP=$(free_port); GW=$(free_port); AD=$(free_port)
(cd "$HERE/openapi" && exec "$PY" yudao_app.py "$UP") >"$WORK/yudao.log" 2>&1 & pids+=($!)
wait_listening "$UP" "${pids[-1]}" || { echo "FAIL the yudao-style backend did not start"; cat "$WORK/yudao.log"; exit 1; }
"$PY" -c "import sys, json; sys.path.insert(0, '$HERE/openapi'); import yudao_app; print(json.dumps(yudao_app.app.openapi()))" >"$WORK/upstream.json"
"$PEEL" openapi --dialect yudao "$WORK/upstream.json" >"$WORK/peel.json" 2>"$WORK/report.txt"
check "yudao-style FastAPI document transformed, nothing reported" "0 0" "$? $(wc -c <"$WORK/report.txt")"
"$PEEL" --upstream "http://127.0.0.1:$UP" --listen "127.0.0.1:$GW" --admin-listen "127.0.0.1:$AD" --workers 1 --dialect yudao \
  --probe-path /admin-api/system/user/page >"$WORK/peel.log" 2>&1 & pids+=($!)
wait_listening "$GW" "${pids[-1]}" || { echo "FAIL Peel did not start"; cat "$WORK/peel.log"; exit 1; }
mkdir -p "$WORK/gen"
(cd "$WORK/gen" && timeout 120 "$VENV/bin/openapi-python-client" generate --path "$WORK/peel.json" --meta none >"$WORK/gen.log" 2>&1)
check "openapi-python-client generates a client from Peel's document" "yes" "$([ -d "$WORK/gen/yudao_style_admin_api_client" ] && echo yes || cat "$WORK/gen.log")"
if "$PY" "$HERE/openapi/generated_client.py" "$WORK/gen" "http://127.0.0.1:$GW"; then pass=$((pass+1)); else fail=$((fail+1)); fi
# Every answer schemathesis provokes (generated and invalid input) must be declared by Peel's
# document: status, media type, headers and schema; 5xx only as declared.
(cd "$WORK" && exec timeout 300 "$VENV/bin/schemathesis" run "$WORK/peel.json" --url "http://127.0.0.1:$GW" --max-examples 30 --seed 1 \
  --checks status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance \
  >"$WORK/schemathesis.log" 2>&1)
rc=$?
grep -E "generated, |passed|failed" "$WORK/schemathesis.log" | tail -3
check "schemathesis: every answer of a live Peel conforms to Peel's document" "0" "$rc"
[ "$rc" = 0 ] || tail -60 "$WORK/schemathesis.log"

# An https group's document: fetched over TLS as the group's calls are sent, so under its ca_file;
# the same endpoint in a group without that CA file cannot be trusted, and /status says why.
TLS=$(free_port); GW2=$(free_port); AD2=$(free_port)
start_tls_upstream "$TLS" /v3/api-docs "$HERE/openapi/wechat-rest.json"
cat >"$WORK/tls.json" <<JSON
{"upstreams": {"wx": {"endpoints": ["https://127.0.0.1:$TLS"], "ca_file": "$WORK/cert.pem", "openapi": {"path": "/v3/api-docs"}},
               "untrusted": {"endpoints": ["https://127.0.0.1:$TLS"], "openapi": {"path": "/v3/api-docs"}}},
 "routes": [{"prefix": "/cgi-bin/", "upstream": "wx", "dialect": "wechat"}, {"prefix": "/u/", "upstream": "untrusted"}]}
JSON
PEEL_CONFIG="$WORK/tls.json" "$PEEL" --listen "127.0.0.1:$GW2" --admin-listen "127.0.0.1:$AD2" --workers 1 --access-log off \
  >"$WORK/peel-tls.log" 2>&1 & pids+=($!)
wait_listening "$AD2" "${pids[-1]}"
states=""
for _ in $(seq 1 100); do
  states=$(curl -s "http://127.0.0.1:$AD2/status" | "$PY" -c 'import json,sys; o=json.load(sys.stdin).get("openapi",{})
print(" ".join(o.get(g,{}).get("state","?") for g in ("wx","untrusted")), "|", o.get("untrusted",{}).get("error"))')
  [[ "$states" == "ok failing"* ]] && break
  sleep 0.1
done
check "https documents: the group with the CA file reads it, the one without fails" "ok failing" "${states%% |*}"
check "https documents: the untrusted group's error is the TLS handshake's" "yes" \
  "$([[ "$states" == *"https://127.0.0.1:$TLS/v3/api-docs: tls: "* ]] && echo yes || echo "$states")"
check "https documents: the fetched document is published under its route's dialect" "yes" \
  "$(curl -s "http://127.0.0.1:$AD2/_peel/openapi.json" | "$PY" -c 'import json,sys; d=json.load(sys.stdin)
s=d["paths"]["/cgi-bin/token"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
print("yes" if sorted(s.get("properties",{}))==["access_token","expires_in"] else json.dumps(s))')"
# The command fetches an https SOURCE as the calls are sent: under --ca-file, or the group's
# ca_file with --config and --group; without it the certificate is not trusted.
"$PEEL" openapi --dialect wechat --ca-file "$WORK/cert.pem" "https://127.0.0.1:$TLS/v3/api-docs" >"$WORK/cli-tls.json" 2>"$WORK/cli-tls.err"
check "peel openapi https://… --ca-file: the document, exit 0" "0 yes" "$? $(grep -q '"/cgi-bin/token"' "$WORK/cli-tls.json" && echo yes || cat "$WORK/cli-tls.err")"
"$PEEL" openapi --config "$WORK/tls.json" --group wx "https://127.0.0.1:$TLS/v3/api-docs" >"$WORK/cli-group.json" 2>"$WORK/cli-group.err"
check "peel openapi --config --group https://…: under the group's ca_file" "0 yes" "$? $(grep -q '"/cgi-bin/token"' "$WORK/cli-group.json" && echo yes || cat "$WORK/cli-group.err")"
"$PEEL" openapi --dialect wechat "https://127.0.0.1:$TLS/v3/api-docs" >/dev/null 2>"$WORK/cli-untrusted.err"
check "peel openapi https://… without a CA that trusts it: exit 2, tls" "2 yes" "$? $(grep -q 'tls: ' "$WORK/cli-untrusted.err" && echo yes || cat "$WORK/cli-untrusted.err")"

echo "openapi live: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
