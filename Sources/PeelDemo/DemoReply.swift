/// How the demo answers one request: at once, later, slowly, or by misbehaving on purpose.
enum DemoReply {
    /// Send the whole response now.
    case respond(DemoResponse)
    /// Send the whole response after `seconds` (a timer; the loop keeps serving other connections).
    case respondLater(DemoResponse, seconds: Double)
    /// Send the head now, then the body one byte every `seconds`.
    case trickle(DemoResponse, seconds: Double)
    /// Send a large generated body in pieces so memory stays small.
    case stream(status: Int, contentType: String, body: GeneratedBody)
    /// Read the request and never answer.
    case stall
    /// Write raw bytes (not necessarily HTTP), then end the connection as `ending` says.
    case raw([UInt8], ending: RawEnding)
    /// Abort the connection with a TCP RST and no answer.
    case reset
}

/// How a raw fault reply ends its connection.
enum RawEnding {
    /// A normal close (FIN) once the bytes are sent.
    case close
    /// A TCP RST after `seconds`, long enough for the bytes to leave first.
    case reset(afterSeconds: Double)
    /// None: the connection stays open and silent (an upstream stalled mid-answer).
    case hold
}
