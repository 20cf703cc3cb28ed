/// What the demo upstream serves, for `peel demo`'s hints and for tests that compare bytes.
public enum DemoCatalog {
    /// The `data` of `/api/user`, byte for byte (`1024.50` stays as written).
    public static let userData = #"{"id":42,"name":"Ada Lovelace","balance":1024.50,"tags":["admin","beta"],"active":true}"#

    /// The `data` of `/api/items`.
    public static let itemsData =
        #"[{"id":1,"name":"Notebook","price":12.90},{"id":2,"name":"Pencil","price":0.85},{"id":3,"name":"Ink","price":7.00}]"#

    /// The `data` of `/api/exact`: numbers, escapes and non-ASCII text that re-serialising would change.
    public static let exactData =
        #"{"price":1.10,"big":12345678901234567890,"negzero":-0.0,"huge":1e400,"escaped":"caf\u00e9\n\"quoted\"","text":"中文","order":{"z":1,"a":2}}"#

    /// The whole `/api/user` envelope.
    public static var userEnvelope: String { JSONText.envelope(code: 0, message: "ok", data: userData) }

    /// Lines `peel demo` prints: one curl command per interesting endpoint, against `gateway`.
    public static func curlLines(gateway: String) -> [String] {
        var base = gateway
        while base.hasSuffix("/") { base.removeLast() }
        return [
            "curl -s \(base)/api/user",
            "curl -s \(base)/api/items",
            "curl -s -X POST -d 'user=ada&amount=10' \(base)/api/echo",
            "curl -s -i \(base)/api/business-error",
            "curl -s -i \(base)/api/token-expired",
            "curl -s -i \(base)/api/html",
            "curl -s -i \(base)/api/nodata",
            "curl -s '\(base)/api/slow?ms=1500'",
            "curl -s '\(base)/api/large?kb=64' | head -c 300",
            "curl -s \(base)/api/exact",
        ]
    }

    /// Every endpoint with a one-line summary, in the order a reader would try them.
    public static let endpoints: [(path: String, summary: String)] = [
        ("/api/user", "success envelope with an object"),
        ("/api/items", "success envelope with an array"),
        ("/api/exact", "numbers and escapes that must pass byte for byte"),
        ("/api/echo", "describes the request it received (any method)"),
        ("/api/null", "data is null"),
        ("/api/nodata", "envelope without data"),
        ("/api/code-string", "code is the string \"0\""),
        ("/api/created", "201 with a success envelope"),
        ("/api/business-error", "code 1001 insufficient balance"),
        ("/api/token-expired", "code 7 token expired"),
        ("/api/html", "an HTML page"),
        ("/api/array", "a bare JSON array"),
        ("/api/invalid-json", "trailing commas"),
        ("/api/duplicate", "code member twice"),
        ("/api/no-code", "envelope without code"),
        ("/api/code-float", "code 0.5"),
        ("/api/message-number", "message is a number"),
        ("/api/empty", "200 with an empty body"),
        ("/api/text-json", "envelope sent as text/html"),
        ("/api/bom", "envelope after a UTF-8 BOM"),
        ("/api/image", "a PNG image"),
        ("/api/gzip", "envelope with Content-Encoding: gzip"),
        ("/api/chunked", "envelope sent with chunked framing"),
        ("/api/status/NNN", "status NNN with an error envelope"),
        ("/api/status-plain/NNN", "status NNN with a plain-text body"),
        ("/api/slow?ms=N", "answers after N ms"),
        ("/api/large?kb=N", "about N KiB of data (default 1024)"),
        ("/fault/stall", "never answers"),
        ("/fault/close-after-headers", "closes after the head"),
        ("/fault/close-mid-body", "closes after 10 of 1000 body bytes"),
        ("/fault/reset", "TCP RST, no answer"),
        ("/fault/reset-mid-body", "TCP RST after part of the body"),
        ("/fault/trickle?ms=N", "one body byte every N ms (default 200)"),
        ("/fault/bad-chunking", "invalid chunk size line"),
        ("/fault/bad-gzip", "Content-Encoding: gzip over garbage"),
        ("/fault/huge?mb=N", "valid envelope of N MiB (default 80), streamed"),
        ("/fault/5xx", "500 with an envelope"),
        ("/fault/garbage", "bytes that are not HTTP, then close"),
        ("/__demo/health", "liveness probe (also /)"),
    ]
}
