#!/usr/bin/env bash
# `peel openapi` against real-shaped documents (issue 34): springdoc's yudao CommonResult, springfox
# 2.0's RuoYi AjaxResult/TableDataInfo, a WeChat-style rest-of-object API and a real FastAPI app's
# own document; every output validated by openapi-spec-validator (scripts/openapi/check.py).
set -uo pipefail
PEEL=${1:?usage: openapi.sh PATH/TO/peel}
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${OPENAPI_VENV:-$HERE/../.build/venv-openapi}
if ! "$VENV/bin/python" -c 'import openapi_spec_validator, fastapi' 2>/dev/null; then
  echo "preparing $VENV (openapi-spec-validator, fastapi)"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || { echo "openapi: cannot create $VENV"; exit 1; }
  "$VENV/bin/pip" install -q --disable-pip-version-check openapi-spec-validator fastapi || { echo "openapi: pip failed"; exit 1; }
fi
export PYTHONDONTWRITEBYTECODE=1
"$VENV/bin/python" -c 'import importlib.metadata as m; print("versions:", ", ".join(f"{p} {m.version(p)}" for p in
  ("openapi-spec-validator", "fastapi", "pydantic")))'
exec "$VENV/bin/python" "$HERE/openapi/check.py" "$PEEL" "$HERE/frameworks"
