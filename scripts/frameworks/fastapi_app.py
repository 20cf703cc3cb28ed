"""A FastAPI app whose answers, failures included, are FastAPI's own: run by uvicorn (app:app)."""
from fastapi import FastAPI, HTTPException, Query, Response
from pydantic import BaseModel, Field, field_validator

app = FastAPI()


class Item(BaseModel):
    name: str
    quantity: int = Field(gt=0)


class Order(BaseModel):
    email: str
    note: str = ""
    items: list[Item]

    @field_validator("note")
    @classmethod
    def no_markup(cls, value: str) -> str:
        if "<" in value:
            raise ValueError("备注不能包含 “<”")
        return value


@app.post("/orders", status_code=201)
def create_order(order: Order):
    return {"email": order.email, "count": len(order.items)}


@app.get("/items")
def list_items(limit: int = Query(10, ge=1, le=100)):
    return [{"id": i, "name": f"item {i}"} for i in range(1, min(limit, 3) + 1)]


@app.get("/items/{item_id}")
def get_item(item_id: int):
    if item_id != 1:
        raise HTTPException(status_code=404, detail="Item not found")
    return {"id": 1, "name": "item 1"}


@app.get("/me")
def me():
    raise HTTPException(status_code=401, detail="Not authenticated", headers={"WWW-Authenticate": "Bearer"})


@app.get("/report")
def report():
    raise HTTPException(status_code=500, detail="db password wrong")


@app.get("/crash")
def crash():
    raise RuntimeError("connection string postgres://admin:hunter2@db")


@app.get("/string")
def a_string():
    return "plain words"


@app.get("/number")
def a_number():
    return 42


@app.get("/nothing")
def nothing():
    return None


@app.delete("/items/{item_id}", status_code=204)
def delete_item(item_id: int):
    return Response(status_code=204)


@app.get("/exact")
def exact():
    # Non-ASCII text, escapes and integers past 2^53 (and 2^64): the bytes must come through as written.
    return {"name": "Zoë 李雷 😀", "quote": "say \"hi\"\n\ttab", "big": 12345678901234567890123,
            "negative": -9007199254740993, "nested": [{"ok": True, "none": None}]}
