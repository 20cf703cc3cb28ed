"""Calls a live Peel through a client openapi-python-client generated from Peel's document: every
answer and every problem must parse into the generated types (issue 34).

    python generated_client.py GENERATED_DIR PEEL_URL
"""
import importlib
import sys

sys.path.insert(0, sys.argv[1])
pkg = importlib.import_module("yudao_style_admin_api_client")
api = "yudao_style_admin_api_client.api.default."
page = importlib.import_module(api + "user_page_admin_api_system_user_page_get")
get = importlib.import_module(api + "user_get_admin_api_system_user_get_get")
create = importlib.import_module(api + "user_create_admin_api_system_user_create_post")
models = importlib.import_module("yudao_style_admin_api_client.models")

client = pkg.Client(base_url=sys.argv[2], raise_on_unexpected_status=True)
failed = 0


def check(name, ok, detail=""):
    global failed
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + str(detail)))
    failed += 0 if ok else 1


r = page.sync_detailed(client=client, page_no=1, page_size=10)
check("generated client: the page is a PageResultUserRespVO", r.status_code == 200 and isinstance(r.parsed, models.PageResultUserRespVO)
      and r.parsed.total == 2 and r.parsed.list_[0].username == "admin", r)
r = get.sync_detailed(client=client, id=1)
check("generated client: one user is a UserRespVO", r.status_code == 200 and isinstance(r.parsed, models.UserRespVO) and r.parsed.id == 1, r)
r = get.sync_detailed(client=client, id=404)
check("generated client: a business failure is a Problem with the backend's words",
      r.status_code == 422 and isinstance(r.parsed, models.Problem) and r.parsed.detail == "用户不存在" and r.parsed.code == 1002003003, r)
r = create.sync_detailed(client=client, body=models.UserSaveReqVO(username="ab", nickname="x"))
check("generated client: FastAPI's validation failure is a Problem with field errors",
      r.status_code == 422 and isinstance(r.parsed, models.Problem) and len(r.parsed.errors) >= 1
      and r.parsed.errors[0].pointer == "#/username", r)
r = create.sync_detailed(client=client, body=models.UserSaveReqVO(username="yudao2", nickname="芋艿"))
check("generated client: a created id is an int", r.status_code == 200 and r.parsed == 3, r)
sys.exit(1 if failed else 0)
