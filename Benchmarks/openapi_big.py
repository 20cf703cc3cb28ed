"""`peel openapi` on a 5 MB document (issue 34's measurement): a springdoc-shaped document of 2,000
operations and 6,000 schemas, every 200 a `CommonResultPageResult…` envelope, written as JSON
(5.6 MB) and as YAML by PyYAML (5.0 MB). Prints the best wall-clock time of RUNS runs of each,
alternating, and checks both give byte for byte the same output.

    python3 Benchmarks/openapi_big.py PEEL [RUNS]     # needs PyYAML
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import yaml

PEEL = sys.argv[1]
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
OPERATIONS = 2000


def document():
    paths, schemas = {}, {}
    for i in range(OPERATIONS):
        name = "Item%04dRespVO" % i
        paths["/admin-api/module%d/item%04d/page" % (i % 40, i)] = {"get": {
            "tags": ["管理后台 - 模块 %d" % (i % 40)],
            "summary": "获得第 %d 个对象的分页列表" % i,
            "description": "Items of kind %d, newest first." % i,
            "operationId": "getItem%04dPage" % i,
            "parameters": [
                {"name": "pageNo", "in": "query", "description": "页码，从 1 开始", "required": True,
                 "schema": {"type": "integer", "format": "int32", "example": 1}},
                {"name": "pageSize", "in": "query", "description": "每页条数，最大值为 100", "required": True,
                 "schema": {"maximum": 200, "minimum": 1, "type": "integer", "format": "int32", "example": 10}},
                {"name": "keyword", "in": "query", "required": False, "schema": {"type": "string", "nullable": True}},
            ],
            "responses": {"200": {"description": "OK", "content": {"*/*": {
                "schema": {"$ref": "#/components/schemas/CommonResultPageResult" + name}}}}},
        }}
        schemas[name] = {"required": ["id", "name", "status"], "type": "object", "properties": {
            "id": {"type": "integer", "format": "int64", "description": "编号", "example": 1024},
            "name": {"type": "string", "description": "名字: the item's display name", "example": "芋艿 %d" % i},
            "status": {"type": "integer", "format": "int32", "description": "状态，参见 CommonStatusEnum 枚举", "example": 1},
            "remark": {"type": "string", "description": "备注: a remark, # not a comment", "nullable": True},
            "amount": {"type": "number", "format": "double", "example": 12.50},
            "tags": {"type": "array", "items": {"type": "string"}, "example": ["a", "b"]},
            "createTime": {"type": "string", "format": "date-time", "description": "创建时间"},
        }}
        schemas["PageResult" + name] = {"required": ["list", "total"], "type": "object", "properties": {
            "list": {"type": "array", "description": "数据", "items": {"$ref": "#/components/schemas/" + name}},
            "total": {"type": "integer", "format": "int64", "description": "总量"},
        }, "description": "分页结果"}
        schemas["CommonResultPageResult" + name] = {"type": "object", "properties": {
            "code": {"type": "integer", "format": "int32"},
            "data": {"$ref": "#/components/schemas/PageResult" + name},
            "msg": {"type": "string"},
        }}
    return {"openapi": "3.0.1", "info": {"title": "yudao-style admin API", "version": "2.0.0"},
            "servers": [{"url": "http://127.0.0.1:48080", "description": "Generated server url"}],
            "paths": paths, "components": {"schemas": schemas}}


def timed(source):
    started = time.monotonic()
    p = subprocess.run([PEEL, "openapi", "--dialect", "yudao", source], capture_output=True, timeout=120)
    elapsed = time.monotonic() - started
    if p.returncode != 0:
        sys.exit("peel openapi %s failed: %s" % (source, p.stderr.decode()[:500]))
    return elapsed, p.stdout


doc = document()
with tempfile.TemporaryDirectory() as scratch:
    as_json, as_yaml = os.path.join(scratch, "big.json"), os.path.join(scratch, "big.yaml")
    with open(as_json, "w") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
    with open(as_yaml, "w") as f:
        yaml.safe_dump(doc, f, allow_unicode=True, sort_keys=False)
    print("documents: JSON %.1f MB, YAML %.1f MB, %d operations, %d schemas" % (
        os.path.getsize(as_json) / 1e6, os.path.getsize(as_yaml) / 1e6, len(doc["paths"]), len(doc["components"]["schemas"])))
    times = {"json": [], "yaml": []}
    outputs = {}
    for _ in range(RUNS):
        for kind, source in (("json", as_json), ("yaml", as_yaml)):
            t, out = timed(source)
            times[kind].append(t)
            outputs[kind] = out
    for kind in ("json", "yaml"):
        print("%s: best %.3f s of %s" % (kind, min(times[kind]), ", ".join("%.3f" % t for t in times[kind])))
    same = outputs["json"] == outputs["yaml"]
    print("YAML's output is the JSON's, byte for byte:", "yes" if same else "NO")
    sys.exit(0 if same else 1)
