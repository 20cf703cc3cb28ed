"""A Flask app answering API errors as JSON the way Flask's documentation shows: run by werkzeug."""
import json
import sys

from flask import Flask, abort, jsonify, request
from werkzeug.exceptions import HTTPException
from werkzeug.serving import run_simple

app = Flask(__name__)


@app.errorhandler(HTTPException)
def handle_exception(e):
    """Flask's "Returning API Errors as JSON": the HTTPException's code, name and description."""
    response = e.get_response()
    response.data = json.dumps({"code": e.code, "name": e.name, "description": e.description})
    response.content_type = "application/json"
    return response


@app.get("/users")
def users():
    return jsonify([{"id": 1, "name": "Ada"}, {"id": 2, "name": "Grace", "city": "Zürich"}])


@app.get("/users/<int:user_id>")
def user(user_id):
    abort(404)


@app.get("/account")
def account():
    abort(401)


@app.get("/export")
def export():
    abort(500, description="disk /var/lib/app full")


@app.post("/users")
def create_user():
    """Laravel-style validation: a message and field -> [messages], dot-notation keys."""
    data = request.get_json(silent=True) or {}
    errors = {}
    if not data.get("email"):
        errors["email"] = ["The email field is required."]
    elif "@" not in data["email"]:
        errors["email"] = ["The email must be a valid email address."]
    for i, item in enumerate(data.get("items") or []):
        if not item.get("name"):
            errors[f"items.{i}.name"] = ["The items.%d.name field is required." % i]
        if not isinstance(item.get("qty"), int) or item["qty"] < 1:
            errors.setdefault(f"items.{i}.qty", []).extend(
                ["The items.%d.qty must be an integer." % i, "La quantité doit être au moins 1."])
    if errors:
        first = next(iter(errors.values()))[0]
        more = sum(len(v) for v in errors.values()) - 1
        message = first + (f" (and {more} more error{'s' if more > 1 else ''})" if more else "")
        return jsonify(message=message, errors=errors), 422
    return jsonify(id=3, email=data["email"]), 201


if __name__ == "__main__":
    run_simple("127.0.0.1", int(sys.argv[1]), app, threaded=True)
