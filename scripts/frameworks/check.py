"""Calls each framework app directly and through its Peel; prints one check per line as NAME<TAB>EXPECTED<TAB>ACTUAL.

usage: check.py NAME:APP_PORT:PEEL_PORT:ACCESS_LOG ...   (NAME is fastapi, flask or drf)

The expected problem is computed from the direct answer by `expected_problem`, a small reader of
the shapes these three frameworks write, following the output contract of issue 33; it shares no
code with Peel. Values are compared as JSON text, and messages as the bytes the upstream wrote.
"""
import http.client
import json
import sys
import time

PROBLEM_ORDER = ["type", "title", "status", "detail", "code", "kind", "request_id", "upstream_status",
                 "reason", "errors", "upstream"]
OWN_DETAIL = {"upstream-error": "The server returned an error",
              "auth-expired": "Your sign-in has expired, please sign in again"}
TITLE = {"upstream-error": "Upstream error", "auth-expired": "Authentication expired"}
DEFAULT_CHALLENGE = 'Bearer error="invalid_token"'
PARAMETER_LOCS = ("query", "path", "header", "cookie")

# Each case: (label, method, path, JSON body or None, the direct status the app must answer).
CASES = {
    "fastapi": [
        ("order with invalid fields", "POST", "/orders",
         {"email": "a", "note": "<b>", "items": [{"quantity": 0}, {"name": "x", "quantity": "many"}]}, 422),
        ("order missing fields", "POST", "/orders", {}, 422),
        ("query constraint", "GET", "/items?limit=0", None, 422),
        ("HTTPException 404", "GET", "/items/7", None, 404),
        ("HTTPException 401 Bearer", "GET", "/me", None, 401),
        ("HTTPException 500", "GET", "/report", None, 500),
        ("uncaught exception", "GET", "/crash", None, 500),
        ("created object", "POST", "/orders", {"email": "a@b.example", "items": [{"name": "x", "quantity": 2}]}, 201),
        ("bare array", "GET", "/items?limit=3", None, 200),
        ("string", "GET", "/string", None, 200),
        ("number", "GET", "/number", None, 200),
        ("null", "GET", "/nothing", None, 200),
        ("204 no body", "DELETE", "/items/1", None, 204),
        ("non-ASCII and big integers", "GET", "/exact", None, 200),
    ],
    "flask": [
        ("jsonify list", "GET", "/users", None, 200),
        ("abort(404)", "GET", "/users/9", None, 404),
        ("abort(401)", "GET", "/account", None, 401),
        ("abort(500)", "GET", "/export", None, 500),
        ("validation, dot keys", "POST", "/users", {"email": "x", "items": [{"name": "a", "qty": 2}, {"qty": 0}]}, 422),
        ("validation, one field", "POST", "/users", {}, 422),
        ("created", "POST", "/users", {"email": "a@b.example"}, 201),
    ],
    "drf": [
        ("list", "GET", "/books", None, 200),
        ("object", "GET", "/books/2", None, 200),
        ("NotFound", "GET", "/books/9", None, 404),
        ("Http404", "GET", "/shelves/attic", None, 404),
        ("TokenAuthentication 401", "GET", "/profile", None, 401),
        ("serializer field errors", "POST", "/signup", {"email": "nope", "password": "short", "address": {"postcode": "1234"}}, 400),
        ("non_field_errors", "POST", "/signup",
         {"email": "a@b.example", "password": "longenough", "password2": "different",
          "address": {"city": "Lyon", "postcode": "69001"}}, 400),
        ("created", "POST", "/signup",
         {"email": "a@b.example", "password": "longenough", "password2": "longenough",
          "address": {"city": "Lyon", "postcode": "69001"}}, 201),
    ],
}


def emit(name, expected, actual):
    dump = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
    print(f"{name}\t{dump(expected)}\t{dump(actual)}", flush=True)


# --- JSON read with the upstream's own bytes: every value's text is kept as written ---------------
DECODER = json.JSONDecoder()
WS = " \t\r\n"


def skip_ws(text, i):
    while i < len(text) and text[i] in WS:
        i += 1
    return i


def members(text):
    """The members of a JSON object's text, in order: [(name, value text as written)]."""
    i = skip_ws(text, 0)
    assert text[i] == "{", "not an object"
    out, i = [], skip_ws(text, i + 1)
    if text[i] == "}":
        return out
    while True:
        name, i = json.decoder.scanstring(text, skip_ws(text, i) + 1)
        i = skip_ws(text, i)
        assert text[i] == ":"
        start = skip_ws(text, i + 1)
        _, end = DECODER.raw_decode(text, start)
        out.append((name, text[start:end]))
        i = skip_ws(text, end)
        if text[i] == "}":
            return out
        assert text[i] == ","
        i += 1


def items(text):
    """The elements of a JSON array's text, each as written."""
    i = skip_ws(text, 0)
    assert text[i] == "[", "not an array"
    out, i = [], skip_ws(text, i + 1)
    if text[i] == "]":
        return out
    while True:
        start = skip_ws(text, i)
        _, end = DECODER.raw_decode(text, start)
        out.append(text[start:end])
        i = skip_ws(text, end)
        if text[i] == "]":
            return out
        assert text[i] == ","
        i += 1


def kind_of(text):
    return {"{": "object", "[": "array", '"': "string"}.get(text.lstrip(WS)[:1], "scalar")


# --- The oracle: what the problem must say, from the direct answer --------------------------------
def pointer(steps):
    return "#" + "".join("/" + str(s).replace("~", "~0").replace("/", "~1") for s in steps)


def field_error(message_text, steps=None, parameter=None):
    """One `errors` entry: the message's JSON string as written, and its pointer or parameter."""
    entry = [["detail", message_text]]
    if parameter is not None:
        entry.append(["parameter", parameter])
    elif steps is not None:
        entry.append(["pointer", pointer(steps)])
    return entry


def drf_field_map(pairs, prefix=()):
    """DRF's {field: [messages] | {nested map}}; None when the map holds anything else."""
    errors = []
    for name, text in pairs:
        if kind_of(text) == "array" and all(kind_of(m) == "string" for m in items(text)):
            for m in items(text):
                errors.append(field_error(m, None if name == "non_field_errors" else prefix + (name,)))
        elif kind_of(text) == "object":
            nested = drf_field_map(members(text), prefix + (name,))
            if nested is None:
                return None
            errors += nested
        else:
            return None
    return errors


def read_shape(text):
    """(shape, message, code text, field errors, members taken) for the shapes these apps write."""
    pairs = members(text)
    body = dict(pairs)
    kinds = {k: kind_of(v) for k, v in pairs}
    loads = json.loads
    # Flask's documented JSON error: code (the HTTP status again, so Peel takes no code from it and
    # leaves it out of `upstream`, as upstream_status says it), name, description.
    if kinds.get("code") == "scalar" and isinstance(loads(body["code"]), int) and \
            kinds.get("name") == "string" and kinds.get("description") == "string":
        return "flask", loads(body["description"]), None, [], {"code", "description"}
    # FastAPI: detail is an array of {loc, msg}.
    if kinds.get("detail") == "array" and items(body["detail"]) and \
            all(kind_of(e) == "object" and {"loc", "msg"} <= dict(members(e)).keys() for e in items(body["detail"])):
        errors = []
        for e in items(body["detail"]):
            entry = dict(members(e))
            loc = loads(entry["loc"])
            if loc and loc[0] in PARAMETER_LOCS:
                errors.append(field_error(entry["msg"], parameter=".".join(str(s) for s in loc[1:])))
            else:
                errors.append(field_error(entry["msg"], loc[1:] if loc and loc[0] == "body" else loc))
        return "fastapi", None, None, errors, {"detail"}
    # Laravel / Rails: errors is an object of field -> [messages] (or one message), dot keys.
    if kinds.get("errors") == "object":
        errors = []
        for name, text in members(body["errors"]):
            for m in (items(text) if kind_of(text) == "array" else [text]):
                errors.append(field_error(m, name.split(".")))
        message = loads(body["message"]) if kinds.get("message") == "string" else None
        return "laravel", message, None, errors, {"errors", "message"}
    # Django REST framework: {"detail": "..."} (FastAPI's HTTPException writes the same), or a field map.
    if kinds.get("detail") == "string":
        return "drf", loads(body["detail"]), None, [], {"detail"}
    errors = drf_field_map(pairs)
    if errors:
        return "drf", None, None, errors, set(body)
    return None


def media_type(headers):
    return headers.get("content-type", "").split(";")[0].strip().lower()


def expected_problem(status, headers, raw):
    """The problem members Peel must answer for a failed upstream answer, per the contract."""
    shape = None
    try:
        text = raw.decode("utf-8").lstrip("\ufeff")
        if kind_of(text) == "object":
            shape = read_shape(text)
    except (UnicodeDecodeError, ValueError, AssertionError):
        pass
    kind = "auth-expired" if status == 401 else "upstream-error"
    want = {"type": "urn:peel:problem:" + kind, "title": TITLE[kind],
            "status": status if status < 500 else 502, "kind": kind, "upstream_status": status}
    private = status >= 500
    message, code, errors, leftover = None, None, [], []
    if shape:
        _, message, code, errors, taken = shape
        leftover = [[k, v] for k, v in members(text) if k not in taken]
    shown = shape is not None and not private
    detail = (message if message else json.loads(errors[0][0][1]) if errors else None) if shown else None
    want["detail"] = detail or OWN_DETAIL[kind]
    want["code"] = json.loads(code) if shown and code is not None else (-104 if kind == "upstream-error" else None)
    if kind == "upstream-error":
        # The status and media type, then the shape that read the body (Peel's diagnosis, not the body).
        want["reason"] = f"upstream {status} {media_type(headers) or 'without Content-Type'}" + \
            (f", read as {shape[0]}" if shape else "")
        want["reason is a prefix"] = False
    if shown and errors:
        want["errors"] = errors
    if shown and leftover:
        want["upstream"] = leftover
    log_message = message if private and shape else None
    return shape[0] if shape else None, want, log_message


# --- Calls ---------------------------------------------------------------------------------------
def call(port, method, path, body, request_id):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"X-Request-Id": request_id, "Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read()
        hdrs = {}
        for k, v in r.getheaders():
            hdrs[k.lower()] = hdrs[k.lower()] + ", " + v if k.lower() in hdrs else v
        return r.status, hdrs, raw
    except OSError as e:
        return 0, {}, f"no answer: {e}".encode()
    finally:
        conn.close()


def log_line(path, request_id):
    """The access-log line for request_id (5 s at most: lines are written after the answer)."""
    for _ in range(100):
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if request_id in line:
                        entry = json.loads(line)
                        if entry.get("request_id") == request_id:
                            return entry
        except OSError:
            pass
        time.sleep(0.05)
    return None


def text_of(raw):
    return raw.decode("utf-8", "backslashreplace")


def check_success(name, direct, through):
    (ds, dh, draw), (ps, ph, praw) = direct, through
    emit(f"{name}: HTTP status", ds, ps)
    emit(f"{name}: body byte for byte", text_of(draw.removeprefix(b"\xef\xbb\xbf")), text_of(praw))
    if draw:
        emit(f"{name}: Content-Type", "application/json", media_type(ph))


def check_failure(name, direct, through, request_id, access_log):
    (ds, dh, draw), (ps, ph, praw) = direct, through
    _, want, log_message = expected_problem(ds, dh, draw)
    emit(f"{name}: HTTP status", want["status"], ps)
    emit(f"{name}: Content-Type", "application/problem+json", media_type(ph))
    try:
        text = praw.decode("utf-8")
        got = members(text)
    except (UnicodeDecodeError, ValueError, AssertionError, IndexError):
        emit(f"{name}: a JSON object", "a problem document", text_of(praw))
        return
    body = dict(got)
    loads = json.loads
    emit(f"{name}: member order", [k for k in PROBLEM_ORDER if k in body], [k for k, _ in got])
    for member in ("type", "title", "status", "kind", "detail", "upstream_status"):
        label = f"{name}: status member" if member == "status" else f"{name}: {member}"
        emit(label, want[member], loads(body[member]) if member in body else "(absent)")
    emit(f"{name}: code", [type(want["code"]).__name__, want["code"]],
         [type(loads(body["code"])).__name__, loads(body["code"])] if "code" in body else "(absent)")
    emit(f"{name}: request_id", request_id, loads(body.get("request_id", '"(absent)"')))
    if "reason" in want:
        reason = loads(body["reason"]) if "reason" in body else "(absent)"
        emit(f"{name}: reason", want["reason"], reason[:len(want["reason"])] if want["reason is a prefix"] else reason)
    got_errors = "(absent)"
    if "errors" in body:
        try:
            # The message as its JSON text (the upstream's bytes), pointer and parameter as values.
            got_errors = [[[k, v if k == "detail" else loads(v)] for k, v in members(e)] for e in items(body["errors"])]
        except (ValueError, AssertionError, IndexError):
            got_errors = body["errors"]
    emit(f"{name}: errors", want.get("errors", "(absent)"), got_errors)
    got_upstream = "(absent)"
    if "upstream" in body:
        try:
            got_upstream = [list(p) for p in members(body["upstream"])]
        except (ValueError, AssertionError, IndexError):
            got_upstream = body["upstream"]
    emit(f"{name}: upstream", want.get("upstream", "(absent)"), got_upstream)
    if ds == 401:
        emit(f"{name}: WWW-Authenticate", dh.get("www-authenticate", DEFAULT_CHALLENGE), ph.get("www-authenticate", "(absent)"))
    if log_message:
        shown = log_message in text or log_message in json.dumps(loads(text), ensure_ascii=False)
        emit(f"{name}: the 5xx message is not shown", False, shown)
        entry = log_line(access_log, request_id) or {}
        emit(f"{name}: the 5xx message is in the access log", log_message, entry.get("upstream_message", "(absent)"))


def is_json(raw):
    try:
        json.loads(raw.decode("utf-8").lstrip("\ufeff"))
        return True
    except ValueError:
        return False


# The shape each failure is read as, where it is not the framework's own name.
SHAPE = {"fastapi": {"HTTPException 404": "drf", "HTTPException 401 Bearer": "drf", "HTTPException 500": "drf",
                     "uncaught exception": None},
         "flask": {"validation, dot keys": "laravel", "validation, one field": "laravel"}}


def main():
    for arg in sys.argv[1:]:
        framework, app_port, peel_port, access_log = arg.split(":", 3)
        for n, (label, method, path, body, want_status) in enumerate(CASES[framework]):
            name = f"{framework} {label} ({method} {path})"
            request_id = f"fw-{framework}-{n}"
            direct = call(int(app_port), method, path, body, request_id + "-direct")
            emit(f"{name}: direct status", want_status, direct[0])
            if 200 <= want_status < 300:
                if want_status != 204:
                    emit(f"{name}: direct answer is JSON", True, is_json(direct[2]))
            else:
                shape = expected_problem(direct[0], direct[1], direct[2])[0]
                emit(f"{name}: direct answer's shape", SHAPE.get(framework, {}).get(label, framework), shape)
            through = call(int(peel_port), method, path, body, request_id)
            if 200 <= direct[0] < 300:
                check_success(name, direct, through)
                if method == "GET":
                    # HEAD answers what GET would: the same status and length, no body.
                    hs, hh, hraw = call(int(peel_port), "HEAD", path, None, request_id + "-head")
                    emit(f"{name}: HEAD through Peel", [direct[0], str(len(direct[2].removeprefix(b"\xef\xbb\xbf"))), ""],
                         [hs, hh.get("content-length", "(absent)"), text_of(hraw)])
            else:
                check_failure(name, direct, through, request_id, access_log)


if __name__ == "__main__":
    main()
