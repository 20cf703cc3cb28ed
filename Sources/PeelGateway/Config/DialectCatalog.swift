import PeelEnvelope

/// `peel dialects`: every preset with its sample envelopes and what Peel answers to each, computed
/// by the same judge and problem renderer that answer clients.
public enum DialectCatalog {
    /// The listing.
    public static func text() -> String {
        var lines: [String] = []
        for dialect in Dialect.presets {
            lines.append("\(dialect.preset): \(Dialect.summary(for: dialect.preset))")
            lines.append("  \(DialectConfig.json(dialect))")
            for sample in Dialect.samples(for: dialect.preset) {
                lines.append("  \(sample.label): \(sample.status) \(sample.body)")
                lines.append("    -> \(answer(to: sample, under: dialect))")
            }
            lines.append("")
        }
        return lines.joined(separator: "\n")
    }

    /// Peel's answer to one sample: its status and body.
    public static func answer(to sample: DialectSample, under dialect: Dialect) -> String {
        var config = EnvelopeConfig()
        config.dialect = dialect
        let body = Array(sample.body.utf8)
        let verdict = judge(UpstreamAnswer(status: sample.status, contentType: "application/json", path: "/", isHead: false),
                            body: body, config: config)
        switch verdict {
        case .unwrap(let status, let range):
            return range.map { "\(status) " + String(decoding: body[$0], as: UTF8.self) } ?? "\(status) (no body)"
        case .unwrapRest(let status, let bytes):
            return "\(status) " + String(decoding: bytes, as: UTF8.self)
        case .passthrough:
            return "\(sample.status) " + sample.body
        case .problem(let p):
            let doc = renderProblem(p, requestId: "example", language: .english, typeBase: config.problemTypeBase)
            return "\(p.status) " + String(decoding: doc, as: UTF8.self)
        }
    }
}
