import Foundation
import PeelEnvelope
import PeelIO

/// The contract Peel publishes at `/_peel/openapi.json`: every group's OpenAPI document, read and
/// transformed on a thread of its own (never on a worker's loop), each route's operations under
/// the path the client uses and the route's dialect, merged and swapped in whole. While a group's
/// read fails, its last good document stays and `/status` says so. A document on the group's
/// endpoint is fetched as the group's calls are sent (http or https, the group's timeouts and CA
/// file), by an upstream client on that thread's loop.
final class ContractPublisher: @unchecked Sendable {
    // Unchecked: `config`, `groups`, `fetches`, `client` and `timer` are touched on `loop`'s thread
    // only; `published` is locked.

    /// One group's document as last read.
    struct GroupState: Sendable {
        var state = "pending"
        var fetchedAt: Double?
        var error: String?
        var since = wallNow()
        var document: ConfigJSON?
        var lastTry = -Double.infinity
    }

    private let loop: EventLoop
    private var timer: LoopTimer?
    private let client: UpstreamClient
    private var config = GatewayConfig()
    private var groups: [String: GroupState] = [:]
    /// Fetches under way, by group: a group's next read waits for its last one.
    private var fetches: [String: UpstreamTransfer] = [:]
    private let published = Locked<(document: [UInt8]?, groups: [String: GroupState])>((nil, [:]))

    init() throws(PeelIOError) {
        loop = try EventLoop()
        var options = UpstreamOptions()
        // A document is read every `refresh` (minutes): a kept connection would only idle.
        options.maxIdleConnections = 1
        client = try UpstreamClient(loop: loop, options: options)
        timer = LoopTimer(loop: loop) { [unowned self] in tick() }
        loop.startThread()
    }

    /// Takes a configuration (at start and on reload): every document is read again now, fetches
    /// under the previous one abandoned (their group's endpoints or CA file may have changed).
    func apply(_ config: GatewayConfig) {
        loop.execute { [self] in
            self.config = config
            for fetch in fetches.values { fetch.cancel() }
            fetches = [:]
            let named = Set(sources.map(\.group.name))
            groups = groups.filter { named.contains($0.key) }
            for name in groups.keys { groups[name]?.lastTry = -Double.infinity }
            tick()
        }
    }

    /// The published document's bytes, shared by every answer that sends it; nil before any group's
    /// document was read.
    var document: [UInt8]? { published.withLock { $0.document } }
    /// Whether any group names a document.
    var hasSources: Bool { published.withLock { !$0.groups.isEmpty } }

    /// `/status`'s `openapi` member: each group's state.
    func statusJSON() -> String {
        let groups = published.withLock { $0.groups }
        return "{" + groups.keys.sorted().map { name in
            let g = groups[name]!
            return jsonEscaped(name) + ":{\"state\":\"\(g.state)\",\"fetched_at\":" + (g.fetchedAt.map { "\"" + rfc3339($0) + "\"" } ?? "null")
                + ",\"error\":" + (g.error.map(jsonEscaped) ?? "null") + ",\"since\":\"" + rfc3339(g.since) + "\"}"
        }.joined(separator: ",") + "}"
    }

    func stop() {
        loop.execute { [self] in
            timer?.cancel()
            for fetch in fetches.values { fetch.cancel() }
            fetches = [:]
            loop.stop()
        }
        loop.join()
    }

    private var sources: [(group: UpstreamGroup, source: ContractSource)] {
        (config.routing?.upstreams ?? []).compactMap { g in g.openapi.map { (g, $0) } }
    }

    /// Reads each document whose refresh is due (a file now, a fetch when it ends), rebuilds the
    /// published one, and sleeps until the next is due.
    private func tick() {
        let now = monotonicNow()
        var changed = false
        var next = Double.infinity
        for (group, source) in sources {
            var g = groups[group.name] ?? GroupState()
            if now - g.lastTry >= source.refresh && fetches[group.name] == nil {
                g.lastTry = now
                switch source.location {
                case .file(let path):
                    g.took(Self.readFile(path))
                    changed = true
                case .path(let path):
                    if let failure = fetch(path, group: group) {
                        g.took(.failure(failure))
                        changed = true
                    }
                }
            }
            groups[group.name] = g
            next = min(next, g.lastTry + source.refresh - now)
        }
        // The states go out every time: a fetch just started shows its group `pending`.
        publish(document: changed || groups.isEmpty)
        if next.isFinite { timer?.arm(seconds: max(1, next)) }
    }

    /// Publishes every group's state and, with `document`, the document rebuilt from every group's
    /// last good one.
    private func publish(document: Bool = true) {
        let text = document ? ContractMerge.published(config, documents: groups.compactMapValues(\.document))?.text : nil
        let bytes = text.map { Array($0.utf8) }
        let states = groups
        published.withLock { $0 = (bytes ?? $0.document, states) }
    }

    /// Fetches `path` from the group's first endpoint, under its base path, as the group's calls
    /// are sent; the result is taken and published when it ends. Nil once it is under way.
    private func fetch(_ path: String, group: UpstreamGroup) -> ReadError? {
        guard let endpoint = group.endpoints.first?.url else { return ReadError(description: "the group has no endpoint") }
        let url = endpoint.origin + endpoint.basePath + path
        let request = UpstreamRequest(method: "GET", target: .url(url), added: [FieldLine("User-Agent", "peel-openapi")],
                                      limits: TransferLimits(config.calls, group: group))
        fetches[group.name] = client.send(request) { [self] result in
            fetches[group.name] = nil
            groups[group.name]?.took(Self.document(from: result, url: url))
            publish()
        }
        return nil
    }

    /// Why a document could not be read.
    struct ReadError: Error, CustomStringConvertible {
        let description: String
    }

    /// A document file, read and parsed.
    static func readFile(_ path: String) -> Result<ConfigJSON, ReadError> {
        guard let data = FileManager.default.contents(atPath: path) else { return .failure(ReadError(description: "cannot read \(path)")) }
        return ContractDocument.parse([UInt8](data)).mapError { ReadError(description: $0.description) }
    }

    /// A fetched document, parsed: only a 200's body is one.
    static func document(from result: Result<UpstreamResponse, UpstreamFailure>, url: String) -> Result<ConfigJSON, ReadError> {
        switch result {
        case .failure(let f):
            return .failure(ReadError(description: "\(url): \(failureReason(f))"))
        case .success(let r) where r.status != 200:
            return .failure(ReadError(description: "\(url) answered \(r.status)"))
        case .success(let r):
            return ContractDocument.parse(r.body).mapError { ReadError(description: $0.description) }
        }
    }
}

extension ContractPublisher.GroupState {
    /// Takes a read's result: a document replaces the last good one; a failure keeps it.
    mutating func took(_ result: Result<ConfigJSON, ContractPublisher.ReadError>) {
        switch result {
        case .success(let doc):
            if state != "ok" { since = wallNow() }
            state = "ok"
            error = nil
            fetchedAt = wallNow()
            document = doc
        case .failure(let why):
            if state != "failing" { since = wallNow() }
            state = "failing"
            error = why.description
        }
    }
}
