import PeelEnvelope
import PeelIO

/// One answer before Peel's own fields are added: every kind of answer (an unwrapped or relayed
/// upstream answer, a stored one while offline, a problem, a preflight, the reachability document
/// or stream) is one of these, and all of them pass `ReplyShaper.shape` (X-Request-Id,
/// CORS and Vary had been added in four or five places each, which is how stale answers lost their
/// CORS fields and Vary came to be sent twice).
struct Reply {
    /// What the answer is; decides which of the upstream's fields it carries.
    enum Kind: Equatable {
        /// The upstream's answer, unwrapped or relayed: its fields minus hop-by-hop and
        /// envelope-describing ones (SPEC).
        case relayed
        /// A stored answer served while offline: as `relayed`, plus Age (RFC 9111 §5.1) and
        /// Cache-Status (RFC 9211 §2).
        case stale(age: Int)
        /// A 304 for a conditional request a stored answer matches while offline: the fields a 200
        /// would carry that describe it (RFC 9110 §15.4.5). `storedType` and `storedCount` say
        /// whether that 200 would have been compressed.
        case staleNotModified(age: Int, storedType: String?, storedCount: Int)
        /// A problem document: only the upstream's fields clients act on.
        case problem(ProblemKind)
        /// An answer Peel makes itself (reachability, a 405 of its own path): no upstream fields.
        case own
        /// A CORS preflight Peel answers: its `fields` are the CORS decision, so no answer fields are added.
        case preflight

        var isProblem: Bool { if case .problem = self { return true } else { return false } }
    }

    /// The body, or its absence.
    enum Body {
        /// `bytes[range]` (all of them when nil); `hold` stays alive until they are written.
        case bytes([UInt8], range: Range<Int>?, hold: BudgetHold?)
        /// A spooled answer's `pieces`, its ranges sent from its file.
        case file(SpooledBody, pieces: [FilePiece])
        /// A spooled answer's `pieces` compressed as they are sent (the shaper's choice for `file`
        /// when the client accepts a coding): its length is known only at its end.
        case encodedFile(SpooledBody, pieces: [FilePiece], coding: ContentCoding)
        /// Sent as it arrives; `contentLength` is the upstream's declared length, if it is kept.
        case stream(contentLength: Int?)
    }

    var status: Int
    var kind: Kind
    /// The upstream's fields (or the stored ones), selected by `kind`.
    var upstream: ResponseHeaders?
    /// The answer's own fields (a problem's Content-Type, Allow, Cache-Control…), after the upstream's.
    var fields: [(String, String)] = []
    /// Replaces the upstream's Content-Type (the unwrapped `data` is application/json).
    var contentType: String?
    /// What the head collector read of `upstream` when it arrived; nil for stored fields.
    var upstreamFacts: ResponseFacts?
    var body: Body
    /// Whether compression may apply (Peel's own documents other than problems are not compressed).
    var compressible = true
    /// False when a spooled body that would be compressed goes as it is (no memory for the encoder
    /// now): it still varies by Accept-Encoding, as other clients get it compressed.
    var encodesFile = true
    /// The connection ends after this answer (a request Peel refused as malformed).
    var closing = false
}

/// What the shaper needs of the call being answered.
struct ReplyContext {
    let requestId: String
    let origin: String?
    let acceptEncoding: AcceptedCodings?
    /// The upstream's Content-Encoding when its body passes in that coding.
    let keptCoding: String?
    /// How URLs and cookies naming the upstream are rewritten; nil leaves them as they are.
    let rewrite: ProxyRewrite?
    /// Host, X-Forwarded-Proto and X-Forwarded-Host as the client sent them (a proxy's only when
    /// trusted): Peel's public origin, worked out only for an answer with a URL to rewrite.
    let host: String?
    let forwardedProto: String?
    let forwardedHost: String?

    init(requestId: String, origin: String?, acceptEncoding: AcceptedCodings?, keptCoding: String?, rewrite: ProxyRewrite? = nil,
         host: String? = nil, forwardedProto: String? = nil, forwardedHost: String? = nil) {
        self.requestId = requestId
        self.origin = origin
        self.acceptEncoding = acceptEncoding
        self.keptCoding = keptCoding
        self.rewrite = rewrite
        self.host = host
        self.forwardedProto = forwardedProto
        self.forwardedHost = forwardedHost
    }
}

/// An answer ready for the writer: its status, its finished fields (the upstream's as selected and
/// rewritten, then Peel's), and the body (compressed when the client accepts a coding Peel offers).
struct ShapedReply {
    let status: Int
    let fields: ReplyFields
    let body: Reply.Body
    let closing: Bool

    /// RFC 9457 §3: the problem document's media type.
    static let problemType = "application/problem+json"

    /// Bytes of the body that will be sent (for the access log).
    var bodyCount: Int {
        switch body {
        case .bytes(let b, let range, _): return (range ?? 0..<b.count).count
        case .file(_, let pieces): return pieces.reduce(0) { $0 + $1.count }
        case .stream, .encodedFile: return 0
        }
    }
}

/// The one function every answer passes: adds X-Request-Id, CORS, Vary, compression and the stale
/// fields, chooses which upstream fields go and how they are rewritten (Hummingbird's middleware
/// around every response, as one pure value). The connection's fate is the connection layer's:
/// the shaper only passes on that a refusal closes.
struct ReplyShaper {
    let cors: CORSPolicy?
    let compression: CompressionPolicy
    let rewriteRedirects: Bool
    let rewriteCookies: Bool
    /// Upstream fields a relayed answer drops: hop-by-hop and envelope-describing ones, Vary (Peel
    /// writes one), the upstream's CORS fields when Peel manages CORS.
    let relayDropped: FieldSet
    /// Upstream fields a problem keeps: those clients act on (RFC 9110 §10.2.3 Retry-After, §11.6.1
    /// WWW-Authenticate; RFC 9111 §5.2 Cache-Control; RFC 6265 Set-Cookie), and the upstream's CORS
    /// fields when Peel does not manage CORS.
    let problemKept: FieldSet
    /// RFC 9110 §15.4.5: what a 304 carries of the answer it stands for (and the upstream's CORS
    /// fields when Peel does not manage CORS).
    let notModifiedKept: FieldSet

    /// Hop-by-hop fields and those describing the envelope bytes (SPEC), never relayed.
    static let neverRelayed = FieldSet.hopByHop.union(FieldSet([.proxyAuthenticate, .contentLength, .contentEncoding,
                                                                .contentMD5, .xRequestId, .vary]))

    init(cors: CORSPolicy?, compression: CompressionPolicy, rewriteRedirects: Bool, rewriteCookies: Bool) {
        self.cors = cors
        self.compression = compression
        self.rewriteRedirects = rewriteRedirects
        self.rewriteCookies = rewriteCookies
        let upstreamCORS = cors == nil ? FieldSet([]) : FieldSet.upstreamCORS
        relayDropped = Self.neverRelayed.union(upstreamCORS)
        let passesCORS = cors == nil ? FieldSet.upstreamCORS : FieldSet([])
        problemKept = FieldSet([.retryAfter, .setCookie, .wwwAuthenticate, .cacheControl]).union(passesCORS)
        notModifiedKept = FieldSet([.cacheControl, .contentLocation, .date, .etag, .expires, .lastModified]).union(passesCORS)
    }

    /// Shapes `reply` for the call `ctx` describes; `encode` compresses a body (nil when it cannot).
    func shape(_ reply: Reply, _ ctx: ReplyContext,
               encode: (UnsafeRawBufferPointer, ContentCoding) -> [UInt8]?) -> ShapedReply {
        let upstream = reply.upstream
        let present = upstream?.present ?? FieldSet([])
        let corsFields = reply.kind == .preflight ? [] : cors?.answerFields(origin: ctx.origin,
                                            upstreamExposed: present.contains(.accessControlExposeHeaders) ? Self.listed(upstream, .accessControlExposeHeaders) : [])
            ?? []
        var body = reply.body
        var rewrites = Rewrites()
        // Whether the representation depends on Accept-Encoding, whether or not this client sent one.
        // Only a relayed body is in the upstream's coding; a problem or Peel's own document made
        // after the head arrived is Peel's JSON (a truncated gzip passthrough's
        // 502 went out marked `Content-Encoding: gzip`).
        let keptCoding = reply.kind == .relayed ? ctx.keptCoding : nil
        var variesByCoding = keptCoding != nil
        var coded: ContentCoding? = nil
        var dropType = false

        // Whether a buffered body of `count` bytes is compressed, and with which coding.
        func coding(count: Int) -> ContentCoding? {
            // A problem's type is Peel's, whatever the upstream's answer said.
            let effectiveType = reply.kind.isProblem ? ShapedReply.problemType : reply.contentType
                ?? (reply.upstreamFacts.map { $0.contentType } ?? upstream?.first(.contentType))
            let candidate = reply.compressible && keptCoding == nil
                && compression.isCandidate(status: reply.status, contentType: effectiveType, count: count)
                // A part of the upstream's representation (206) is relayed as it is; a problem is Peel's own body.
                && (reply.kind.isProblem || !present.contains(.contentRange))
            guard candidate else { return nil }
            variesByCoding = true
            return CompressionPolicy.negotiate(ctx.acceptEncoding, offered: compression.offered)
        }
        switch reply.body {
        case .bytes(let bytes, let range, _):
            let slice = range ?? 0..<bytes.count
            if let c = coding(count: slice.count),
               let encoded = bytes.withUnsafeBytes({ encode(UnsafeRawBufferPointer(rebasing: $0[slice]), c) }) {
                coded = c
                body = .bytes(encoded, range: nil, hold: nil)
            }
        case .file(let file, let pieces):
            // Compressed from the file as it is sent (EncodedFileStream), never whole in memory.
            if let c = coding(count: pieces.reduce(0) { $0 + $1.count }), reply.encodesFile {
                coded = c
                body = .encodedFile(file, pieces: pieces, coding: c)
            }
        case .stream, .encodedFile:
            break
        }

        let selection: Selection
        switch reply.kind {
        case .relayed, .stale:
            // A 204 has no content, so no Content-Type (RFC 9110 §15.3.5, §8.3): not the envelope's either.
            dropType = reply.contentType != nil || reply.status == 204
            selection = .allBut(dropType ? relayDropped.union(FieldSet([.contentType])) : relayDropped)
            rewrites.redirects = rewriteRedirects
            rewrites.cookies = rewriteCookies
            rewrites.weakenETag = coded != nil
        case .staleNotModified(_, let storedType, let storedCount):
            selection = .only(notModifiedKept)
            rewrites.redirects = rewriteRedirects
            // Vary: Accept-Encoding and a weakened ETag where the 200 would have been compressed.
            let candidate = storedType != nil && compression.isCandidate(status: 200, contentType: storedType, count: storedCount)
            variesByCoding = candidate
            rewrites.weakenETag = candidate && CompressionPolicy.negotiate(ctx.acceptEncoding, offered: compression.offered) != nil
        case .problem:
            selection = .only(problemKept)
            rewrites.cookies = rewriteCookies
        case .own, .preflight:
            selection = .only(FieldSet([]))
        }

        // The upstream's fields first, then Peel's, written straight into the lines with no list of
        // String pairs in between; Peel's own names go under their tokens, never identified again.
        var out = ReplyFields(capacity: 512)
        if let upstream { Self.copy(upstream, selection, rewrites, ctx, into: &out) }
        out.add(.xRequestId, "X-Request-Id", ctx.requestId)
        for (name, value) in corsFields where !Self.isVary(name) { out.add(name, value) }
        if case .problem = reply.kind {
            out.add(.contentType, "Content-Type", ShapedReply.problemType)
            if !present.contains(.cacheControl) { out.add(.cacheControl, "Cache-Control", "no-store") }
            // RFC 9110 §15.5.2: a 401 carries a challenge; the Bearer scheme's for an expired token (RFC 6750 §3).
            if reply.status == 401 && !present.contains(.wwwAuthenticate) {
                out.add(.wwwAuthenticate, "WWW-Authenticate", "Bearer error=\"invalid_token\"")
            }
        }
        var varyNames = present.contains(.vary) ? Self.listed(upstream, .vary) : []
        for (name, value) in reply.fields {
            if Self.isVary(name) { varyNames += value.split(separator: ",").map { trimOWS($0) } } else { out.add(name, value) }
        }
        if let contentType = reply.contentType { out.add(.contentType, "Content-Type", contentType) }
        switch reply.kind {
        case .stale(let age), .staleNotModified(let age, _, _):
            out.add(.age, "Age", String(age))
            out.add("Cache-Status", "Peel; hit; detail=offline")
        default:
            break
        }
        // One Vary field (RFC 9110 §12.5.5; two, or a name twice, confuse caches): the upstream's
        // names, Accept-Encoding, CORS's.
        if variesByCoding { varyNames.append("Accept-Encoding") }
        for (name, value) in corsFields where Self.isVary(name) {
            varyNames += value.split(separator: ",").map { trimOWS($0) }
        }
        if let vary = Self.mergedVary(varyNames) { out.add(.vary, "Vary", vary) }
        if let keptCoding { out.add(.contentEncoding, "Content-Encoding", keptCoding) }
        if let coded { out.add(.contentEncoding, "Content-Encoding", coded.rawValue) }
        return ShapedReply(status: reply.status, fields: out, body: body, closing: reply.closing)
    }

    /// Which upstream fields an answer copies as they are: all but some (`relayed`), or only some.
    enum Selection: Equatable {
        case allBut(FieldSet)
        case only(FieldSet)
    }

    /// Which upstream fields' values are rewritten as they are copied.
    struct Rewrites {
        var redirects = false
        var cookies = false
        var weakenETag = false
        var any: Bool { redirects || cookies || weakenETag }
    }

    /// Copies `upstream`'s selected fields into `out`, rewriting those `rewrites` names.
    private static func copy(_ upstream: ResponseHeaders, _ selection: Selection, _ rewrites: Rewrites, _ ctx: ReplyContext,
                             into out: inout ReplyFields) {
        guard rewrites.any else {
            switch selection {
            case .allBut(let dropped): out.add(upstream, dropping: dropped)
            case .only(let kept): upstream.forEachField { f in if f.isIn(kept) { out.add(f) } }
            }
            return
        }
        var origin: String?? = nil
        func publicOrigin() -> String? {
            if let o = origin { return o }
            let o = ProxyRewrite.publicOrigin(host: ctx.host, forwardedProto: ctx.forwardedProto, forwardedHost: ctx.forwardedHost)
            origin = .some(o)
            return o
        }
        upstream.forEachField { f in
            switch selection {
            case .allBut(let dropped): if f.isIn(dropped) { return }
            case .only(let kept): if !f.isIn(kept) { return }
            }
            switch f.token {
            case .location where rewrites.redirects, .contentLocation where rewrites.redirects:
                guard let rewrite = ctx.rewrite else { return out.add(f) }
                out.add(f.nameString, rewrite.location(f.valueString, publicOrigin: publicOrigin()))
            case .refresh where rewrites.redirects:
                guard let rewrite = ctx.rewrite else { return out.add(f) }
                out.add(f.nameString, rewrite.refresh(f.valueString, publicOrigin: publicOrigin()))
            case .setCookie where rewrites.cookies:
                guard let rewrite = ctx.rewrite else { return out.add(f) }
                out.add(f.nameString, rewrite.setCookie(f.valueString))
            case .etag where rewrites.weakenETag:
                // A strong validator names one exact representation; the encoded one differs from
                // the upstream's, so its ETag is weakened, as nginx's gzip does (RFC 9110 §8.8.1, §8.8.3).
                let v = f.valueString
                out.add(f.nameString, v.hasPrefix("W/") ? v : "W/" + v)
            default:
                out.add(f)
            }
        }
    }

    /// The names a list field (Vary, Access-Control-Expose-Headers) of `headers` lists, every line.
    static func listed(_ headers: ResponseHeaders?, _ token: FieldToken) -> [String] {
        var names: [String] = []
        headers?.forEachField { f in
            if f.token == token { names += f.valueString.split(separator: ",").map { trimOWS($0) } }
        }
        return names
    }

    /// Whether a field name is Vary.
    static func isVary(_ name: String) -> Bool { name.utf8.count == 4 && name.lowercased() == "vary" }

    /// `names` without empty ones and repeats (case-insensitive), joined; `*` when one is `*`.
    static func mergedVary(_ names: [String]) -> String? {
        var seen: Set<String> = []
        var out: [String] = []
        for name in names where !name.isEmpty {
            if name == "*" { return "*" }
            if seen.insert(name.lowercased()).inserted { out.append(name) }
        }
        return out.isEmpty ? nil : out.joined(separator: ", ")
    }
}
