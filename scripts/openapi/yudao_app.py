"""A ruoyi-vue-pro (yudao) style backend in FastAPI: every answer is `CommonResult` (`code` 0 on
success, `msg`, `data`) with HTTP 200, business failures included, as yudao's GlobalExceptionHandler
answers them; FastAPI's own request validation stays a 422 with its `detail` list. Its
/openapi.json declares the generic envelopes (`CommonResult_PageResult_UserRespVO__`), as springdoc
does for the Java original. For scripts/openapi.sh: Peel in front of it, clients generated from
Peel's document calling it."""
import sys
from typing import Generic, List, TypeVar

from fastapi import FastAPI, Query
from pydantic import BaseModel, Field

T = TypeVar("T")
app = FastAPI(title="yudao-style admin API", version="2.4.1")


class CommonResult(BaseModel, Generic[T]):
    code: int
    msg: str
    data: T


class UserRespVO(BaseModel):
    id: int
    username: str
    nickname: str
    status: int


class PageResult(BaseModel, Generic[T]):
    list: List[T]
    total: int


class UserSaveReqVO(BaseModel):
    username: str = Field(min_length=4, max_length=30)
    nickname: str = Field(max_length=30)


USERS = {1: UserRespVO(id=1, username="admin", nickname="芋道源码", status=0),
         2: UserRespVO(id=2, username="yudao", nickname="芋艿", status=0)}


class BusinessError(BaseModel):
    code: int
    msg: str
    data: None = None


@app.get("/admin-api/system/user/page", response_model=CommonResult[PageResult[UserRespVO]],
         responses={200: {"model": CommonResult[PageResult[UserRespVO]]}})
def user_page(pageNo: int = Query(1, ge=1), pageSize: int = Query(10, ge=1, le=100)):
    users = list(USERS.values())
    start = (pageNo - 1) * pageSize
    return {"code": 0, "msg": "", "data": {"list": users[start:start + pageSize], "total": len(users)}}


@app.get("/admin-api/system/user/get", response_model=CommonResult[UserRespVO])
def user_get(id: int = Query(...)):
    user = USERS.get(id)
    if user is None:
        # yudao answers a business failure with HTTP 200 and its code (USER_NOT_EXISTS).
        from fastapi.responses import JSONResponse
        return JSONResponse({"code": 1002003003, "msg": "用户不存在", "data": None})
    return {"code": 0, "msg": "", "data": user}


@app.post("/admin-api/system/user/create", response_model=CommonResult[int])
def user_create(body: UserSaveReqVO):
    return {"code": 0, "msg": "", "data": 3}


@app.delete("/admin-api/system/user/delete", response_model=CommonResult[bool])
def user_delete(id: int = Query(...)):
    return {"code": 0, "msg": "", "data": id in USERS}


if __name__ == "__main__":
    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
