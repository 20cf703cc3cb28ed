import PeelIO

/// What the forwarder does with an upstream answer's head, decided from its facts alone: pure, so
/// the unit tests reach it without a socket. `Forwarder+Answer` applies it to the call.
enum HeadDecision {
    /// How a passthrough answer's body goes to the client.
    enum Body: Equatable {
        /// Buffered whole: judged, or passed with its length and maybe compressed.
        case buffer
        /// Sent as it arrives, with this declared length (nil: chunked).
        case stream(contentLength: Int?)
    }

    /// The coding a body keeps when it passes as it came: the client accepts every coding the
    /// upstream applied, and the answer passes unjudged. nil: curl decodes it (a judged answer is
    /// read decoded; a coding the client cannot take is removed).
    static func keptCoding(_ facts: ResponseFacts, accepted: AcceptedCodings?, passesUnjudged: @autoclosure () -> Bool) -> String? {
        guard facts.isCoded, let coding = facts.contentEncoding,
              CompressionPolicy.accepts(accepted, contentEncoding: coding), passesUnjudged() else { return nil }
        return trimOWS(coding)
    }

    /// How a passthrough answer's body goes out. An answer curl decodes has a Content-Length that
    /// says nothing of its decoded size, so it streams like one of unknown length (chunked) rather
    /// than meet max_upstream_body; any other declared length is the body's and is kept (downloads
    /// keep their length). Unknown lengths, lengths over `threshold` and event streams stream. A
    /// status that has no content (1xx, 204, 205, 304: RFC 9110 §15) has nothing to stream: its head
    /// is answered whole (a 304 refreshes a stored answer, which only a buffered one does).
    static func body(_ facts: ResponseFacts, keptCoding: String?, threshold: Int) -> Body {
        if facts.status < 200 || facts.status == 204 || facts.status == 205 || facts.status == 304 { return .buffer }
        let declared = keptCoding == nil && facts.isCoded ? nil : facts.contentLength
        if !facts.isEventStream, let length = declared, length <= threshold { return .buffer }
        return .stream(contentLength: declared)
    }
}
