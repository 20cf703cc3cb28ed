import Foundation
import PeelEnvelope
import PeelIO

/// The contract Peel publishes at `/_peel/openapi.json`: every group's OpenAPI document, read and
/// transformed on a thread of its own (never on a worker's loop), each route's operations under
/// the path the client uses and the route's dialect, merged and swapped in whole. While a group's
/// read fails, its last good document stays and `/status` says so.
final class ContractPublisher: @unchecked Sendable {
    // Unchecked: `config`, `documents` and `timer` are touched on `loop`'s thread only; `published`
    // is locked.

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
    private var config = GatewayConfig()
    private var groups: [String: GroupState] = [:]
    private let published = Locked<(document: [UInt8]?, groups: [String: GroupState])>((nil, [:]))

    init() throws(PeelIOError) {
        loop = try EventLoop()
        timer = LoopTimer(loop: loop) { [unowned self] in tick() }
        loop.startThread()
    }

    /// Takes a configuration (at start and on reload): every document is read again now.
    func apply(_ config: GatewayConfig) {
        loop.execute { [self] in
            self.config = config
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
            loop.stop()
        }
        loop.join()
    }

    private var sources: [(group: UpstreamGroup, source: ContractSource)] {
        (config.routing?.upstreams ?? []).compactMap { g in g.openapi.map { (g, $0) } }
    }

    /// Reads each document whose refresh is due, rebuilds the published one, and sleeps until the
    /// next is due.
    private func tick() {
        let now = monotonicNow()
        var changed = false
        var next = Double.infinity
        for (group, source) in sources {
            var g = groups[group.name] ?? GroupState()
            if now - g.lastTry >= source.refresh {
                g.lastTry = now
                switch Self.read(source, group: group) {
                case .success(let doc):
                    if g.state != "ok" { g.since = wallNow() }
                    g.state = "ok"
                    g.error = nil
                    g.fetchedAt = wallNow()
                    g.document = doc
                case .failure(let why):
                    if g.state != "failing" { g.since = wallNow() }
                    g.state = "failing"
                    g.error = why.description
                }
                changed = true
            }
            groups[group.name] = g
            next = min(next, g.lastTry + source.refresh - now)
        }
        if changed || groups.isEmpty {
            let text = ContractMerge.published(config, documents: groups.compactMapValues(\.document))?.text
            let bytes = text.map { Array($0.utf8) }
            let states = groups
            published.withLock { $0 = (bytes ?? $0.document, states) }
        }
        if next.isFinite { timer?.arm(seconds: max(1, next)) }
    }

    /// Why a document could not be read.
    struct ReadError: Error, CustomStringConvertible {
        let description: String
    }

    /// A group's document, read and parsed (strict JSON).
    static func read(_ source: ContractSource, group: UpstreamGroup) -> Result<ConfigJSON, ReadError> {
        let bytes: [UInt8]
        switch source.location {
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else { return .failure(ReadError(description: "cannot read \(path)")) }
            bytes = [UInt8](data)
        case .path(let path):
            guard let endpoint = group.endpoints.first?.url else { return .failure(ReadError(description: "the group has no endpoint")) }
            guard endpoint.scheme == "http" else {
                return .failure(ReadError(description: "documents are fetched over http only; name a file for an https group"))
            }
            guard let r = BlockingClient.get(host: endpoint.host, port: endpoint.port ?? 80, path: endpoint.basePath + path, timeout: 10) else {
                return .failure(ReadError(description: "\(endpoint.origin)\(endpoint.basePath)\(path) did not answer"))
            }
            guard r.status == 200 else { return .failure(ReadError(description: "\(endpoint.origin)\(endpoint.basePath)\(path) answered \(r.status)")) }
            bytes = r.body
        }
        return ContractDocument.parse(bytes).mapError { ReadError(description: $0.description) }
    }
}
