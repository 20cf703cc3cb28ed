"""Checks `peel openapi` on real-shaped documents (issue 34): every document Peel writes validates
with openapi-spec-validator, and what it says is what Peel answers: envelopes unwrapped to their
payloads, the upstream's failures and Peel's own as the one Problem schema, springfox's names
cleaned, unreferenced schemas dropped.

    python check.py PEEL FASTAPI_APP_DIR
"""
import json
import subprocess
import sys

from openapi_spec_validator import validate

PEEL, APPS = sys.argv[1], sys.argv[2]
HERE = __file__.rsplit("/", 1)[0]
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + name)
    else:
        failed += 1
        print("FAIL " + name + (": " + detail if detail else ""))


def peel_openapi(source, *args, stdin=None):
    p = subprocess.run([PEEL, "openapi", *args, source], input=stdin, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def transformed(name, source, *args, stdin=None):
    code, out, err = peel_openapi(source, *args, stdin=stdin)
    check(name + ": peel openapi exits 0", code == 0, err)
    doc = json.loads(out) if code == 0 else {}
    try:
        validate(doc)
        check(name + ": openapi-spec-validator accepts Peel's document", True)
    except Exception as e:  # noqa: BLE001 — the validator's own error is the message
        check(name + ": openapi-spec-validator accepts Peel's document", False, str(e)[:300])
    check(name + ": OpenAPI 3.1.0", doc.get("openapi") == "3.1.0", doc.get("openapi"))
    return doc, err


def responses(doc, path, method):
    return doc["paths"][path][method]["responses"]


def is_problem(r):
    return list(r.get("content", {}).keys()) == ["application/problem+json"] and \
        r["content"]["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/Problem"}


# springdoc, yudao's CommonResult<PageResult<T>>
doc, err = transformed("yudao (springdoc 3.0.1)", HERE + "/yudao-springdoc.json", "--dialect", "yudao")
page = responses(doc, "/admin-api/system/user/page", "get")
# springdoc never marks `data` required: the envelope may carry null or nothing (Peel answers null or 204).
check("yudao: the page's 200 is PageResultUserRespVO or null, as application/json",
      page["200"]["content"] == {"application/json": {"schema": {"anyOf": [{"$ref": "#/components/schemas/PageResultUserRespVO"}, {"type": "null"}]}}},
      json.dumps(page["200"]))
check("yudao: the page may answer 204", "204" in page)
get = responses(doc, "/admin-api/system/user/get", "get")["200"]["content"]["application/json"]
check("yudao: the envelope's example is unwrapped", get.get("example", {}).get("username") == "yudao" and "code" not in get["example"],
      json.dumps(get.get("example")))
check("yudao: every operation declares 401, 502, 503 and 504 as problems",
      all(is_problem(responses(doc, p, m)[s]) for p, m in [("/admin-api/system/user/page", "get"), ("/admin-api/system/user/create", "post")]
          for s in ["401", "502", "503", "504", "default"]))
check("yudao: 503 says Retry-After", "Retry-After" in page["503"].get("headers", {}))
schemas = doc["components"]["schemas"]
check("yudao: the CommonResult envelopes and unused schemas are gone",
      not any(n.startswith("CommonResult") for n in schemas) and "UnusedVO" not in schemas, ", ".join(schemas))
check("yudao: nullable became a null type", schemas["UserRespVO"]["properties"]["deptId"].get("type") == ["integer", "null"])
check("yudao: nothing reported", err.strip() == "", err)

# springfox 2.0, RuoYi's AjaxResult and TableDataInfo
doc, err = transformed("ruoyi (springfox 2.0)", HERE + "/ruoyi-springfox.json", "--dialect", "ruoyi")
rows = responses(doc, "/system/user/list", "get")["200"]["content"]["application/json"]["schema"]
check("ruoyi: TableDataInfo becomes {rows, total}", sorted(rows.get("properties", {})) == ["rows", "total"], json.dumps(rows))
info = responses(doc, "/system/user/{userId}", "get")["200"]["content"]
check("ruoyi: AjaxResult is left as it is, marked untyped", any(v.get("x-peel-unwrap") == "untyped" for v in info.values()), json.dumps(info))
check("ruoyi: the untyped operation is reported", "GET /system/user/{userId}" in err, err)
check("ruoyi: springfox's 401/403/404 become the Problem",
      all(is_problem(responses(doc, "/system/user/list", "get")[s]) for s in ["401", "403", "404"]))
names = list(doc["components"]["schemas"])
check("ruoyi: component names match ^[A-Za-z0-9._-]+$", all(all(c.isalnum() and c.isascii() or c in "._-" for c in n) for n in names), names)
check("ruoyi: the body parameter became a request body",
      doc["paths"]["/test/user/save"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/UserEntity"})

# WeChat-style: the payload is the rest of the object
doc, err = transformed("wechat (rest of the object)", HERE + "/wechat-rest.json", "--dialect", "wechat")
token = responses(doc, "/cgi-bin/token", "get")["200"]["content"]["application/json"]["schema"]
check("wechat: the token answer is {access_token, expires_in} without errcode/errmsg",
      sorted(token.get("properties", {})) == ["access_token", "expires_in"], json.dumps(token))
send = responses(doc, "/cgi-bin/message/custom/send", "post")
check("wechat: a bare envelope answers 204", "204" in send and "200" not in send and "content" not in send["204"], json.dumps(send)[:200])

# A real FastAPI application's own document under the rest preset: 2xx untouched, 422 the Problem.
sys.path.insert(0, APPS)
import fastapi_app  # noqa: E402

source = json.dumps(fastapi_app.app.openapi())
doc, err = transformed("fastapi (rest preset, from standard input)", "-", "--dialect", "rest", stdin=source)
original = json.loads(source)
some = [(p, m) for p, item in original["paths"].items() for m in item if m in ("get", "post", "put", "patch", "delete")]
check("fastapi: every 2xx is as FastAPI declared it",
      all(doc["paths"][p][m]["responses"][s] == r for p, m in some for s, r in original["paths"][p][m]["responses"].items() if s.startswith("2")))
check("fastapi: every 422 is the Problem",
      all(is_problem(doc["paths"][p][m]["responses"]["422"]) for p, m in some if "422" in original["paths"][p][m]["responses"]))

# --detect
code, out, err = peel_openapi(HERE + "/yudao-springdoc.json", "--detect")
check("detect: yudao's document matches the yudao preset", code == 0 and any("yudao" in line and "4 of 4" in line for line in out.splitlines()), out + err)
code, out, err = peel_openapi(HERE + "/wechat-rest.json", "--detect")
check("detect: the wechat document matches wechat", code == 0 and "wechat" in out, out + err)

# YAML: each sample written out by PyYAML gives the same document as its JSON, in PyYAML's block
# style and in the others it writes: escaped non-ASCII, long scalars broken over lines, a wider
# indentation, CRLF line ends and an explicit document start. (A document in flow style from its
# first `{` is read as JSON, strictly.)
import yaml  # noqa: E402
STYLES = {"block": dict(allow_unicode=True),
          "ASCII escapes, folded lines": dict(allow_unicode=False, width=24), "indent 4, ---": dict(indent=4, explicit_start=True),
          "CRLF": dict(allow_unicode=True, line_break="\r\n")}
for name, dialect in [("yudao-springdoc", "yudao"), ("ruoyi-springfox", "ruoyi"), ("wechat-rest", "wechat")]:
    with open(HERE + "/" + name + ".json") as f:
        original = json.load(f)
    _, from_json, _ = peel_openapi(HERE + "/" + name + ".json", "--dialect", dialect)
    for style, options in STYLES.items():
        text = yaml.safe_dump(original, sort_keys=False, **options)
        p = subprocess.run([PEEL, "openapi", "--dialect", dialect, "-"], input=text.encode(), capture_output=True, timeout=60)
        check("YAML (%s): %s read from YAML is the same contract" % (style, name), p.returncode == 0 and p.stdout.decode() == from_json,
              p.stderr.decode())

# --config and --group: the group's routes, each under its prefix and dialect, as the admin listener publishes them.
import os
import tempfile
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as cfg:
    json.dump({"upstreams": {"admin": {"endpoints": ["http://127.0.0.1:9"]}},
               "routes": [{"prefix": "/y/", "upstream": "admin", "strip_prefix": True, "dialect": "yudao"}]}, cfg)
doc, err = transformed("--group (yudao under /y/)", HERE + "/yudao-springdoc.json", "--config", cfg.name, "--group", "admin")
os.unlink(cfg.name)
check("--group: every operation under the route's prefix", sorted(doc.get("paths", {})) == [
    "/_peel/reachability", "/y/admin-api/system/user/create", "/y/admin-api/system/user/delete",
    "/y/admin-api/system/user/get", "/y/admin-api/system/user/page"], sorted(doc.get("paths", {})))

# Routes that match on Host: their paths name those hosts (path-level servers, x-peel-hosts), and
# the document still validates.
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as cfg:
    json.dump({"upstreams": {"wx": {"endpoints": ["http://127.0.0.1:9"]}},
               "routes": [{"host": "api.example.com", "prefix": "/cgi-bin/token", "upstream": "wx", "dialect": "wechat"},
                          {"host": "*.tenants.example", "prefix": "/cgi-bin/", "upstream": "wx", "dialect": "wechat"}],
               "openapi": {"server": "https://gw.example.com"}}, cfg)
doc, err = transformed("--group with host routes", HERE + "/wechat-rest.json", "--config", cfg.name, "--group", "wx")
os.unlink(cfg.name)
token = doc.get("paths", {}).get("/cgi-bin/token", {})
check("host routes: the path names its exact host as a server, and every host as x-peel-hosts",
      token.get("servers") == [{"url": "https://api.example.com"}] and token.get("x-peel-hosts") == ["api.example.com", "*.tenants.example"],
      json.dumps({k: v for k, v in token.items() if k != "get"}))
check("host routes: a wildcard alone names no server", "servers" not in doc.get("paths", {}).get("/cgi-bin/message/custom/send", {"servers": 1}))

# Refusals are clear.
code, out, err = peel_openapi("-", "--dialect", "yudao", stdin="{\"openapi\": \"3.0.1\",}")
check("a document that is not strict JSON is refused with exit 2", code == 2 and "not one JSON text" in err, err)
code, out, err = peel_openapi("-", "--dialect", "yudao", stdin="openapi: 3.0.1\nx: &a 1\n")
check("a YAML document with an anchor is refused with its line", code == 2 and "YAML line 2: anchors" in err, err)
code, out, err = peel_openapi("-", stdin="{\"info\": {}}")
check("a document that is no OpenAPI is refused with exit 2", code == 2 and "openapi" in err, err)

print("openapi: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
