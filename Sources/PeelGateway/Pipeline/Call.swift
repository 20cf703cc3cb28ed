import PeelEnvelope
import PeelIO

/// Where a call is, from its plan to its end: one value, so no two flags can disagree.
enum CallState {
    /// Planned; no upstream work yet (or answered without any: offline, refused, preflight).
    case planned
    /// Sent upstream; no head yet.
    case awaitingHead(UpstreamTransfer)
    /// An attempt failed and another is scheduled for the next loop pass.
    case betweenAttempts
    /// The head came and the body is being buffered whole (to be judged or passed with its length).
    case buffering(UpstreamTransfer)
    /// The answer is streamed to the client as it arrives.
    case streaming(UpstreamTransfer, ReplyStream)
    /// Answered whole and counted.
    case answered
    /// A streamed answer was cut short (upstream failure or shutdown) and counted.
    case cut
    /// The client left before its answer was whole; counted as 499.
    case clientGone

    /// Whether the call is over for the forwarder: counted and logged.
    var isOver: Bool {
        switch self {
        case .answered, .cut, .clientGone: true
        case .planned, .awaitingHead, .betweenAttempts, .buffering, .streaming: false
        }
    }
}

/// What the upstream has said of a call so far: for the problem made from its answer and the log line.
struct UpstreamSaid {
    var status: Int?
    /// The answer's fields, kept for a problem document made from its answer.
    var headers: ResponseHeaders?
    var duration: Double?
    /// The envelope code as the upstream sent it; nil when there was no envelope.
    var code: EnvelopeCode?
}

/// The one decision made on the final head of an answer (`Forwarder.headArrived`).
struct HeadTerms {
    /// The judge's view of the head.
    let answer: UpstreamAnswer
    /// Whether the answer passes unjudged, decided from its status and fields alone.
    let passesUnjudged: Bool
    /// The upstream's Content-Encoding when the body passes in that coding (the client takes it).
    let keptCoding: String?
}

/// What the access log says of a call besides its outcome.
struct CallNotes {
    /// Why the answer was refused or cut (Peel's diagnosis).
    var reason: String?
    /// The start of a non-envelope upstream body that was refused, escaped.
    var excerpt: String?
    /// A 5xx's message that the client is not shown.
    var privateMessage: String?
    /// What a tunnel did, for its line at the close.
    var tunnel: TunnelReport?
}

/// One call, alive from its plan to its log line: the plan it keeps, and what changes as it runs.
/// Loop-thread only, and no member is ever reached while another access to it is open, so the
/// runtime's exclusivity checks on each access (about 90 instructions apiece, a dozen per call:
/// callgrind) are left out for these members.
final class Call {
    let plan: CallPlan
    /// Where the call is.
    @exclusivity(unchecked) var state = CallState.planned
    /// Its attempts across the route's group.
    @exclusivity(unchecked) var attempts = Attempts()
    /// What the upstream said.
    @exclusivity(unchecked) var upstream = UpstreamSaid()
    /// The latest answer's head decision; nil before a head.
    @exclusivity(unchecked) var head: HeadTerms?
    /// Body bytes streamed so far.
    @exclusivity(unchecked) var streamedBytes = 0
    /// What the log line adds.
    @exclusivity(unchecked) var notes = CallNotes()

    init(_ plan: CallPlan) { self.plan = plan }

    var exchange: HTTPExchange { plan.exchange }
    var route: Route { plan.route }
    /// Counted and logged: the call is over for the forwarder.
    var done: Bool { state.isOver }
    /// The upstream transfer while one runs.
    var transfer: UpstreamTransfer? {
        switch state {
        case .awaitingHead(let t), .buffering(let t), .streaming(let t, _): t
        case .planned, .betweenAttempts, .answered, .cut, .clientGone: nil
        }
    }
    /// The answer being streamed from the upstream as it arrives, if it is.
    var stream: ReplyStream? {
        if case .streaming(_, let s) = state { return s }
        return nil
    }
    /// The rewriting for what this call's live answer names: a bare path is read under the base
    /// path of the endpoint that answered (before an answer, under any endpoint's).
    var rewrite: ProxyRewrite { route.rewrite(answeredBy: upstream.status == nil ? nil : attempts.index) }
}
