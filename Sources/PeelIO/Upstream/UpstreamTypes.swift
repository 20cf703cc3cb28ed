import CCurl

/// Settings for one worker's upstream client.
public struct UpstreamOptions: Sendable {
    /// Whole exchange limit in seconds (default 30, the seed's timeoutInterval).
    public var timeout: Double = 30
    /// TCP+TLS connect limit in seconds (default 5).
    public var connectTimeout: Double = 5
    /// Largest upstream body in bytes after decoding (default 64 MiB).
    public var maxResponseBody: Int = 67_108_864
    /// Extra CA bundle for https upstreams (default: system store).
    public var caFile: String? = nil
    /// Receive buffer per transfer in bytes (default 256 KiB: large bodies arrive in few reads).
    public var bufferSize: Int = 256 * 1024
    /// Idle keep-alive connections kept per worker (default 1024).
    public var maxIdleConnections: Int = 1024
    /// Transfers in flight per worker before new ones are refused (default 10000).
    public var maxInFlight: Int = 10_000
    /// The process's body budget; upstream bodies are counted against it as they arrive (default
    /// none: unbounded but for `maxResponseBody`).
    public var budget: MemoryBudget? = nil
    /// Longest wait in seconds between two reads from the upstream once a streamed answer flows
    /// (nginx's proxy_read_timeout); 0 is none (default 60).
    public var idleTimeout: Double = 60
    /// Where buffered answers past its threshold go (disk, bounded by its own budget); nil keeps
    /// every buffered answer in memory (default).
    public var spool: Spool? = nil
    /// Creates the defaults.
    public init() {}
}

/// Why an upstream exchange produced no usable answer; the gateway maps these to the error table.
public enum UpstreamFailure: Error, Sendable, Equatable {
    /// Name resolution failed.
    case dns(String)
    /// Connection refused or no route.
    case refused(String)
    /// The TCP+TLS connect did not finish within the connect timeout.
    case connectTimeout(String)
    /// The whole exchange did not finish within the timeout.
    case timeout(String)
    /// The connection was reset or closed before a whole answer.
    case reset(String)
    /// TLS handshake or certificate failure.
    case tls(String)
    /// The answer broke HTTP (bad chunking, bad encoding, garbage status line).
    case protocolError(String)
    /// The body exceeded `maxResponseBody`.
    case tooLarge
    /// Holding the rest of the body would pass the process's memory budget.
    case overBudget
    /// Holding the rest of the body would pass its client's share of the memory budget.
    case overClientShare
    /// Spooling the rest of the body would pass the process's disk budget (`max_spooled`).
    case overSpoolBudget
    /// Spooling the rest of the body would pass its client's share of the disk budget.
    case overSpoolClientShare
    /// The spool file could not be created or written (a full disk, a file-size limit, an I/O error).
    case spoolWrite(String)
    /// Too many transfers already in flight on this worker.
    case overloaded
    /// Peel itself ran out of a resource (descriptors, memory) opening the upstream socket: a local
    /// condition, never evidence about the upstream.
    case localResources(String)
    /// The connection died after the request went out, and it was not sent again: the method is
    /// not idempotent (RFC 9110 §9.2.2), or an idempotent one already had its one retry.
    case notResent(String)
    /// A streamed answer's upstream sent nothing for `idleTimeout`: the transfer was cut.
    case streamIdle(String)
    /// Anything else curl reported.
    case other(String)

    /// True for failures that say the upstream cannot be reached (feeds passive health checks):
    /// name resolution, refused or unroutable connects, connect timeouts, TLS handshakes (SPEC,
    /// Reachability). A reset or a close before any status line is not one: the upstream
    /// took the connection, so it is there, and counting it let any client that found a path whose
    /// worker dies take Peel offline for everyone. `.notResent` is not one either: a reused
    /// keep-alive connection the upstream closed while it was idle is the usual cause.
    public var isTransportFailure: Bool {
        switch self {
        case .dns, .refused, .connectTimeout, .tls: return true
        default: return false
        }
    }

    /// True for failures that came with an answer (a status line, then a broken or oversized body):
    /// the upstream is there. Evidence for reachability like any answer. A timeout or a close with
    /// no status line is neither a pass nor a failure: calls in flight when a
    /// host drops off the network time out long after it went, and must not bring it back.
    public var answeredBadly: Bool {
        switch self {
        case .protocolError, .tooLarge: return true
        default: return false
        }
    }

    /// A short label for metrics and logs.
    public var reason: String {
        switch self {
        case .dns: return "dns"
        case .refused: return "refused"
        case .connectTimeout: return "connect_timeout"
        case .timeout: return "timeout"
        case .reset: return "reset"
        case .tls: return "tls"
        case .protocolError: return "protocol"
        case .tooLarge: return "too_large"
        case .overBudget: return "over_budget"
        case .overClientShare: return "over_client_share"
        case .overSpoolBudget: return "over_spool_budget"
        case .overSpoolClientShare: return "over_spool_client_share"
        case .spoolWrite: return "spool_write"
        case .overloaded: return "overloaded"
        case .localResources: return "local_resources"
        case .notResent: return "not_resent"
        case .streamIdle: return "upstream_idle"
        case .other: return "other"
        }
    }

    /// curl's words for the failure.
    public var message: String {
        switch self {
        case .dns(let m), .refused(let m), .connectTimeout(let m), .timeout(let m), .reset(let m), .tls(let m),
             .protocolError(let m), .other(let m), .localResources(let m), .notResent(let m), .streamIdle(let m),
             .spoolWrite(let m): return m
        case .tooLarge: return "upstream body too large"
        case .overBudget: return "the upstream body would pass Peel's memory budget (max_buffered)"
        case .overClientShare: return "the upstream body would pass its client's share of Peel's memory budget (max_buffered_per_client)"
        case .overloaded: return "too many upstream transfers in flight"
        case .overSpoolBudget: return "the upstream body would pass Peel's disk budget (max_spooled)"
        case .overSpoolClientShare: return "the upstream body would pass its client's share of Peel's disk budget (max_spooled_per_client)"
        }
    }
}

/// A whole upstream answer.
public struct UpstreamResponse: Sendable {
    /// HTTP status of the final response.
    public var status: Int
    /// Response header fields as received (final response only, no trailers).
    public var headers: ResponseHeaders
    /// What the stages read of the head, summarized once when it arrived.
    public var facts: ResponseFacts
    /// Body bytes, decoded from any Content-Encoding; empty when the body is `spooled`.
    public var body: [UInt8]
    /// Seconds from start to the last byte.
    public var duration: Double
    /// True when the body went to a `StreamSink` as it arrived (`body` is then empty).
    public var streamed = false
    /// The budget this body holds; given back when the last owner lets go (after the answer made
    /// from it is written, when it is handed on with `HTTPExchange.respond(keeping:)`).
    public var hold: BudgetHold? = nil
    /// The body, when it passed the spool threshold: in a file, not in `body`.
    public var spooled: SpooledBody? = nil

    /// Bytes of the body, wherever it is.
    public var bodyCount: Int { spooled?.count ?? body.count }
}

/// Bytes of the memory budget held for as long as this object lives, charged to `client` too when set.
public final class BudgetHold: Sendable {
    private let budget: MemoryBudget
    private let bytes: Int
    private let client: String?

    init(_ budget: MemoryBudget, _ bytes: Int, client: String?) {
        self.budget = budget
        self.bytes = bytes
        self.client = client
    }

    deinit {
        if let client { budget.release(bytes, client: client) } else { budget.release(bytes) }
    }

    /// `n` bytes of `budget` for `client` (its share and the whole), held until the hold goes; the
    /// refusal when they do not fit.
    public static func take(_ n: Int, from budget: MemoryBudget, client: String) -> Result<BudgetHold, MemoryBudget.Refusal> {
        if let refusal = budget.reserve(n, client: client) { return .failure(refusal) }
        return .success(BudgetHold(budget, n, client: client))
    }
}

/// What a streaming sink did with one piece of the upstream body.
public enum SinkResult {
    /// Taken: ask for more.
    case taken
    /// Not taken: pause the transfer (CURL_WRITEFUNC_PAUSE) until `resume()`; the same bytes come again.
    case pause
    /// Not taken, and never will be: end the transfer (it fails with a write error).
    case abort
}

/// Takes the upstream body piece by piece as it arrives, instead of buffering it whole.
public typealias StreamSink = (UnsafeRawBufferPointer) -> SinkResult

/// What the gateway decided for an answer when its final head was whole: the one decision made on
/// the head (h2o hands the upstream head over once, as a value, in the same way).
public struct HeadPlan {
    /// The body stays in the content coding it arrived in: curl does not decode it, so a declared
    /// Content-Length stays true.
    public var keepsCoding: Bool
    /// Takes the body as it arrives (with no size limit and no whole-exchange timeout once it
    /// flows); nil buffers it whole.
    public var sink: StreamSink?
    /// The answer flows from its head (an event stream, whose head the client already has): the
    /// whole-exchange timeout gives way to the idle timeout now, not with the first body byte.
    public var flowsFromHead: Bool
    /// The answer is whole with its head (a HEAD request's): the transfer ends here, its
    /// connection closed rather than held until the body's first byte.
    public var stop: Bool

    public init(keepsCoding: Bool, sink: StreamSink?, flowsFromHead: Bool = false, stop: Bool = false) {
        self.keepsCoding = keepsCoding
        self.sink = sink
        self.flowsFromHead = flowsFromHead
        self.stop = stop
    }

    /// Buffered whole and decoded.
    public static var buffer: HeadPlan { HeadPlan(keepsCoding: false, sink: nil) }
    /// Ended with the head.
    public static var stopped: HeadPlan { HeadPlan(keepsCoding: false, sink: nil, stop: true) }
}

/// What to send upstream as the body.
public enum UpstreamBody {
    /// No body.
    case none
    /// The client's body, read in place until the exchange is answered.
    case exchange(HTTPExchange)
    /// Bytes owned by the transfer.
    case bytes([UInt8])
}

/// Where one upstream transfer is (one value instead of flags over several classes).
enum TransferState: Equatable {
    /// The request is going out, or the answer's head is coming in.
    case awaitingHead
    /// The final head is whole and the body is to be buffered (`onHead` said so); no body byte yet.
    case headWhole
    /// The body is buffered whole, to be judged.
    case buffering
    /// The body goes to a sink as it arrives; `paused` while the client reads slowly.
    case streaming(paused: Bool)
    /// A callback stopped the transfer, and this is what curl's generic error means.
    case stopped(TransferStop)

    /// Whether the body began: its first byte arrived, or the head chose a sink for it.
    var bodyStarted: Bool {
        switch self {
        case .awaitingHead, .headWhole: return false
        case .buffering, .streaming, .stopped: return true
        }
    }
}

/// Why one of curl's callbacks stopped a transfer.
enum TransferStop: Equatable {
    /// The buffered body outgrew the limit (`.tooLarge`).
    case tooLarge
    /// The memory budget refused more of the body (`.overBudget`).
    case overBudget
    /// The client's share of the memory budget refused more of the body (`.overClientShare`).
    case overClientShare
    /// curl was about to send a request a second time that must not be (`.notResent`).
    case resendRefused
    /// The gateway had its whole answer with the head (`HeadPlan.stop`).
    case answeredWithHead
    /// The disk budget refused more of a spooled body (`.overSpoolBudget`).
    case overSpoolBudget
    /// The client's share of the disk budget refused more of a spooled body (`.overSpoolClientShare`).
    case overSpoolClientShare
    /// The spool file could not be created or written (`.spoolWrite`).
    case spoolWrite(SpoolError)
}

/// A transfer in flight; `cancel()` stops it without calling its completion.
public final class UpstreamTransfer {
    /// The pooled handle while the transfer runs; nil once finished or cancelled.
    var handle: EasyHandle?
    /// This transfer's number on its client, never 0: what a socket's owner is known by.
    var serial: UInt64 = 0
    /// Response body bytes received so far.
    var body: [UInt8] = []
    /// The request body when the transfer owns it (`UpstreamBody.bytes`).
    var ownedRequestBody: [UInt8] = []
    /// Keeps the exchange whose body curl reads in place alive until the transfer ends.
    var requestBodyOwner: HTTPExchange?
    /// A request body spooled to a file, read by curl's read callback from `requestFileOffset`.
    var requestFile: SpooledBody?
    /// The next byte of `requestFile` curl reads.
    var requestFileOffset = 0
    /// Where the transfer is, and why a callback stopped it: one value, read by `classify`.
    var state = TransferState.awaitingHead
    /// The request method, as sent.
    var method = ""
    /// How many times curl may send the request: 1 for non-idempotent methods, 2 for the others.
    var allowedSends = 1
    /// How many times curl was about to send it (CURLOPT_PREREQFUNCTION calls).
    var sends = 0
    /// Largest body accepted, in bytes.
    var limit = 0
    /// Silence allowed once the answer streams, in seconds (the call's, else the client's).
    var idleSeconds: Double = 60
    /// The budget the body is counted against, and how much of it this transfer holds.
    var budget: MemoryBudget?
    var budgetHeld = 0
    /// Where the body goes past the spool's threshold; nil keeps it in memory.
    var spool: Spool?
    /// The body's spool file once it passed the threshold (`body` is then empty).
    var spoolWriter: SpoolWriter?
    /// The address of the client the answer is for (the peer, or the client a trusted proxy
    /// names); nil for Peel's own calls (probes). Grouped only once the answer outgrows
    /// `MemoryBudget.answerAllowance`.
    public var clientAddress: String?
    /// The client group `budgetHeld` is charged to; nil while the whole budget alone counts it.
    var chargedTo: String?
    /// Runs once with the result; nil after it ran or after `cancel()`.
    var completion: ((Result<UpstreamResponse, UpstreamFailure>) -> Void)?
    /// The client that runs the transfer.
    weak var client: UpstreamClient?
    /// Loop time when the transfer started.
    var started: Double = 0
    /// Runs once, when the final head is whole and before any body byte, with the head's facts and
    /// fields: the one decision on the answer's head (`HeadPlan`). Runs inside curl's header
    /// callback: it must not call curl.
    public var onHead: ((ResponseFacts, ResponseHeadView) -> HeadPlan)?
    /// The sink `onHead` chose; nil while the body is buffered.
    var sink: StreamSink?
    /// Whether the sink paused the transfer (it waits for `resume()`).
    var paused: Bool { if case .streaming(paused: true) = state { return true } else { return false } }
    /// Monotonic seconds of the last body bytes a streamed answer's sink took (or of its resume).
    var lastRead = 0.0
    /// Cuts a streamed answer whose upstream goes silent (`UpstreamOptions.idleTimeout`); nil until
    /// a stream flows.
    var idleTimer: LoopTimer?

    /// Counts `n` more bytes of a buffered body: against the whole budget, and once the body
    /// outgrows `MemoryBudget.answerAllowance`, all of it against its client's share, so that one
    /// client's unread answers cannot hold the budget every other client's calls need. The
    /// refusal, with nothing taken, when a bound has no room.
    func charge(_ n: Int, to budget: MemoryBudget) -> MemoryBudget.Refusal? {
        if let key = chargedTo {
            if let refusal = budget.reserveAnswer(n, client: key, held: budgetHeld, charged: true) { return refusal }
        } else if budgetHeld + n > MemoryBudget.answerAllowance, let clientAddress {
            let key = IPNetwork.clientGroup(clientAddress)
            if let refusal = budget.reserveAnswer(n, client: key, held: budgetHeld, charged: false) { return refusal }
            chargedTo = key
        } else if !budget.reserve(n) {
            return .full
        }
        budgetHeld += n
        return nil
    }

    /// Gives back what the transfer holds of the budget (its body was dropped or handed on).
    func releaseBudget() {
        if let key = chargedTo { budget?.release(budgetHeld, client: key) } else { budget?.release(budgetHeld) }
        budgetHeld = 0
        chargedTo = nil
    }

    /// What the transfer holds of the budget, handed on with its body; nil when it holds nothing.
    func takeHold() -> BudgetHold? {
        guard let budget, budgetHeld > 0 else { return nil }
        let hold = BudgetHold(budget, budgetHeld, client: chargedTo)
        budgetHeld = 0
        chargedTo = nil
        return hold
    }

    /// Starts the idle watch for a stream that just began flowing; loop thread, no curl calls.
    func watchIdle(loop: EventLoop, seconds: Double) {
        guard seconds > 0 else { return }
        lastRead = monotonicSeconds()
        let timer = LoopTimer(loop: loop) { [weak self] in self?.idleCheck(seconds) }
        idleTimer = timer
        timer.arm(seconds: seconds)
    }

    private func idleCheck(_ seconds: Double) {
        guard handle != nil, let client else { return }
        // Paused by the client's back-pressure: the upstream is not the one being slow (the client's
        // write timeout bounds that side).
        if paused {
            idleTimer?.arm(seconds: seconds)
            return
        }
        let quiet = monotonicSeconds() - lastRead
        if quiet < seconds {
            idleTimer?.arm(seconds: seconds - quiet)
            return
        }
        client.expire(self, .streamIdle("the upstream sent nothing for \(seconds) s (upstream_idle_timeout)"))
    }

    /// The body is in its content coding, as the upstream sent it (`onHead` said so).
    public internal(set) var codingKept = false

    /// Lets a transfer its sink paused deliver again (curl_easy_pause, CURLPAUSE_CONT). Never call
    /// it from inside the sink.
    public func resume() {
        guard paused, let h = handle else { return }
        state = .streaming(paused: false)
        client?.pausedBySink[ObjectIdentifier(self)] = nil
        lastRead = monotonicSeconds()
        // CURLPAUSE_CONT is 0; curl may deliver the held bytes from inside this call.
        let rc = curl_easy_pause(h.easy, 0)
        client?.settle()
        if rc != CURLE_OK { client?.record(curlError(rc, "curl_easy_pause(CURLPAUSE_CONT)")) }
    }

    /// `cancel()` on the next loop pass: safe from code that curl's callbacks may have called.
    public func cancelSoon() {
        completion = nil
        client?.loop.defer { [self] in cancel() }
    }

    /// Whether the request went out on some connection (curl reached the point of sending it): a
    /// later connect failure (curl's own retry on a fresh connection) does not make it unsent.
    public var requestWentOut: Bool { sends > 0 }

    /// CURLOPT_PREREQFUNCTION: curl is about to send the request on a connection. libcurl 7.88 sends
    /// it again by itself, on a fresh connection, when a reused one dies before any answer byte
    /// (`Curl_retry_request`: "Connection died, retrying a fresh connect", rewinding POSTFIELDS);
    /// each attempt passes through here first, so counting them is where re-sends are refused.
    func mayBeSent() -> Bool {
        sends += 1
        if sends <= allowedSends { return true }
        state = .stopped(.resendRefused)
        return false
    }

    /// The failure for a re-send `mayBeSent` refused.
    var refusedResend: UpstreamFailure {
        if allowedSends > 1 {
            return .notResent("the connection died after the request was sent, twice; \(method) is re-sent once only")
        }
        return .notResent("the connection died after the request was sent; not re-sent because \(method) is not idempotent")
    }

    /// Stops the transfer; its completion never runs.
    public func cancel() {
        completion = nil
        client?.abort(self)
    }
}
