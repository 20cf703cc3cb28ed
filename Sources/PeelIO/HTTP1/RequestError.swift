/// Why Peel's HTTP/1.1 server refused a request before any handler could act on it. A typed value,
/// answered in one place (the gateway turns it into a problem document like any other failure).
public enum RequestError: Equatable, Sendable, Error {
    /// The bytes break RFC 9112 framing.
    case malformed(FramingViolation)
    /// The request line is longer than the parser's limit.
    case targetTooLong
    /// The head (request line and fields) is over its limit, or has too many fields.
    case headTooLarge
    /// The body, declared or de-chunked, is over `max_body`.
    case bodyTooLarge
    /// An `Expect` other than `100-continue` (RFC 9110 §10.1.1).
    case expectationFailed
    /// The head did not arrive within `header_timeout`.
    case headTimeout
    /// The body did not arrive within `body_timeout`.
    case bodyTimeout
    /// Holding the body would pass the process's memory budget (`max_buffered`).
    case overBudget
    /// Holding the body would pass this client's share of the budget (`max_buffered_per_client`).
    case overClientShare
    /// Spooling the body would pass the process's disk budget (`max_spooled`).
    case overSpoolBudget
    /// Spooling the body would pass this client's share of the disk budget (`max_spooled_per_client`).
    case overSpoolClientShare
    /// The body's spool file could not be created or written (disk full, an I/O error).
    case spoolWrite(SpoolError)
    /// An HTTP/2 connection preface (`PRI * HTTP/2.0`, RFC 9113 §3.4) on this HTTP/1.1 listener.
    case http2Preface
    /// A TLS handshake record (RFC 8446 §5.1: 0x16, then version 0x03 0x0x) on the plain-HTTP listener.
    case tlsHandshake

    /// The status it is answered with.
    public var status: Int {
        switch self {
        case .malformed(.badVersion): return 505
        case .malformed: return 400
        case .targetTooLong: return 414
        case .headTooLarge: return 431
        case .bodyTooLarge: return 413
        case .expectationFailed: return 417
        case .headTimeout, .bodyTimeout: return 408
        case .overBudget, .overClientShare, .overSpoolBudget, .overSpoolClientShare, .spoolWrite: return 503
        // Logged with these; on the wire the first gets an HTTP/2 GOAWAY and the second nothing
        // (see `foreignReply`): neither client would read an HTTP/1.1 answer.
        case .http2Preface: return 505
        case .tlsHandshake: return 400
        }
    }

    /// A sentence for the problem document's detail.
    public var detail: String {
        switch self {
        case .malformed(let v): return v.rawValue
        case .targetTooLong: return "request line too long"
        case .headTooLarge: return "request head too large"
        case .bodyTooLarge: return "request body too large"
        case .expectationFailed: return "only the 100-continue expectation is supported"
        case .headTimeout: return "request head not received in time"
        case .bodyTimeout: return "request body not received in time"
        case .overBudget: return "Peel holds as many request bodies as its memory budget allows; try again shortly"
        case .overClientShare: return "this client already holds its share of Peel's memory budget (max_buffered_per_client); try again shortly"
        case .overSpoolBudget: return "Peel holds as many spooled request bodies as its disk budget allows (max_spooled); try again shortly"
        case .overSpoolClientShare: return "this client already holds its share of Peel's disk budget (max_spooled_per_client); try again shortly"
        case .spoolWrite: return "Peel could not write the request body to its spool; try again shortly"
        case .http2Preface: return "HTTP/2 connection preface on an HTTP/1.1 listener"
        case .tlsHandshake: return "tls handshake on a plain-HTTP listener"
        }
    }

    /// What the client gets instead of an HTTP/1.1 answer, for a client speaking another protocol;
    /// nil for every other refusal. HTTP/2: the server preface (an empty SETTINGS frame, RFC 9113
    /// §3.4) then GOAWAY with HTTP_1_1_REQUIRED (0xd, §7), which clients report as "use HTTP/1.1".
    /// TLS: nothing (an HTTP answer would read as a garbled record); the connection closes.
    public var foreignReply: [UInt8]? {
        switch self {
        case .http2Preface:
            let settings: [UInt8] = [0, 0, 0, 0x04, 0, 0, 0, 0, 0]
            // Length 8, type GOAWAY (0x7), no flags, stream 0; last stream id 0, error code 0xd.
            let goaway: [UInt8] = [0, 0, 8, 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0d]
            return settings + goaway
        case .tlsHandshake:
            return []
        default:
            return nil
        }
    }

    /// True when the request was too big rather than wrong (the gateway's `request-too-large` kind).
    public var isTooLarge: Bool {
        switch self {
        case .targetTooLong, .headTooLarge, .bodyTooLarge: return true
        default: return false
        }
    }
}

/// Why a request's bytes were refused (RFC 9112), answered 400 unless `RequestError` says otherwise.
public enum FramingViolation: String, Equatable, Sendable {
    case bareLF = "bare LF line ending"
    case controlCharacter = "control character in the request head"
    case obsFold = "obsolete line folding"
    case badRequestLine = "malformed request line"
    case badVersion = "unsupported HTTP version"
    case badFieldName = "malformed header field name"
    case spaceBeforeColon = "whitespace between header name and colon"
    case badContentLength = "invalid Content-Length"
    case duplicateContentLength = "more than one Content-Length"
    case lengthAndChunked = "both Transfer-Encoding and Content-Length"
    case badTransferEncoding = "Transfer-Encoding must be exactly chunked"
    case bodyNotAllowed = "a body on a method Peel cannot forward one with"
    case badChunk = "malformed chunked body"
}
