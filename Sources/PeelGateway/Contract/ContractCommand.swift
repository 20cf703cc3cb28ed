import Foundation
import PeelEnvelope
import PeelIO

/// `peel openapi`: the document of what Peel answers, from the upstream's, under the dialect and
/// options the rest of the command line (and the environment and config file) give; or, with
/// `--detect`, which presets' envelopes the upstream's 2xx schemas are.
public enum ContractCommand {
    /// What the command prints and how it ends.
    public struct Outcome: Sendable {
        public var stdout = ""
        public var stderr: [String] = []
        public var code: Int32 = 0
    }

    /// Runs the command with `arguments` (after `openapi`); `read` gives the SOURCE's bytes (a
    /// path or URL, or nil for standard input), a URL fetched under the limits given.
    public static func run(_ arguments: [String], environment: [String: String],
                           read: (String?, TransferLimits) throws -> [UInt8]) -> Outcome {
        var out = Outcome()
        var options: [String] = []
        var source: String?
        var detect = false
        var group: String?
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            if a == "--detect" {
                detect = true
            } else if a == "--group" || a.hasPrefix("--group=") {
                if a == "--group" {
                    guard i + 1 < arguments.count else { return failed("--group needs a group's name", &out) }
                    group = arguments[i + 1]
                    i += 1
                } else {
                    group = String(a.dropFirst("--group=".count))
                }
            } else if a.hasPrefix("--") {
                options.append(a)
                if !a.contains("="), i + 1 < arguments.count {
                    options.append(arguments[i + 1])
                    i += 1
                }
            } else if source == nil {
                source = a
            } else {
                return failed("unexpected argument \(a)", &out)
            }
            i += 1
        }
        var env = environment
        // The contract does not depend on where the upstream is; the loader asks for one.
        if env["PEEL_UPSTREAM"] == nil { env["PEEL_UPSTREAM"] = "http://127.0.0.1:9" }
        let isURL = source.map { $0.hasPrefix("http://") || $0.hasPrefix("https://") } ?? false
        // --detect reads no option, unless a URL is fetched under them.
        var loaded: GatewayConfig?
        if !detect || isURL {
            do {
                loaded = try ConfigLoader.load(arguments: options, environment: env)
            } catch {
                // The loader's line names the option already ("peel: --dialect: …").
                out.stderr.append(error.description)
                out.code = 2
                return out
            }
        }
        let config = loaded ?? GatewayConfig()
        // A URL is fetched as the calls are sent: --group's timeouts and CA file, else the options'.
        let limits = TransferLimits(config.calls, group: group.flatMap { g in config.routing?.upstreams.first { $0.name == g } })
        let bytes: [UInt8]
        do {
            bytes = try read(source == "-" ? nil : source, limits)
        } catch {
            return failed("cannot read \(source ?? "standard input"): \(error)", &out)
        }
        let document: ConfigJSON
        switch ContractDocument.parse(bytes) {
        case .success(let d): document = d
        case .failure(let why): return failed("\(source ?? "standard input"): \(why)", &out)
        }
        if detect { return detected(document, &out) }
        if let group {
            // The group's routes, as the admin listener publishes them: each route's dialect and
            // operations under its prefix.
            guard config.routing?.upstreams.contains(where: { $0.name == group }) == true else {
                return failed("--group: the configuration has no upstream group \(group)", &out)
            }
            guard let merged = ContractMerge.published(config, documents: [group: document]) else {
                return failed("--group \(group): no route leads to the group, or the document is no OpenAPI", &out)
            }
            out.stdout = merged.text
            return out
        }
        var contract = OpenAPIContract(envelope: config.envelope, reachabilityPath: config.reachability.path)
        do {
            out.stdout = try contract.transform(document).text
        } catch {
            return failed(error.description, &out)
        }
        out.stderr = contract.report.map { "peel openapi: not unwrapped: " + $0 }
        return out
    }

    /// Why a SOURCE could not be read.
    public struct SourceError: Error, CustomStringConvertible {
        public let description: String
    }

    /// A SOURCE's bytes: a file, an `http://` or `https://` URL fetched under `limits` (its
    /// answer's body, which must be 200), or standard input for nil.
    public static func readSource(_ source: String?, limits: TransferLimits) throws -> [UInt8] {
        guard let source else { return [UInt8](FileHandle.standardInput.readDataToEndOfFile()) }
        if source.hasPrefix("http://") || source.hasPrefix("https://") {
            switch OneFetch.get(source, limits: limits) {
            case .failure(let f): throw SourceError(description: failureReason(f))
            case .success(let r) where r.status != 200: throw SourceError(description: "answered \(r.status)")
            case .success(let r): return r.body
            }
        }
        guard let data = FileManager.default.contents(atPath: source) else { throw SourceError(description: "no such readable file") }
        return [UInt8](data)
    }

    private static func detected(_ document: ConfigJSON, _ out: inout Outcome) -> Outcome {
        var rows: [(names: [String], matched: Int, operations: Int)] = []
        // `rest` reads no envelope, so every object would match it.
        for preset in Dialect.presets where !preset.codes.isEmpty || preset.success.path != nil {
            var envelope = EnvelopeConfig()
            envelope.dialect = preset
            var contract = OpenAPIContract(envelope: envelope, reachabilityPath: nil)
            guard let (matched, operations) = try? contract.envelopeMatches(document), matched > 0 else { continue }
            // Presets with the same members (ruoyi and yudao) match the same operations: one row.
            if let i = rows.firstIndex(where: { $0.matched == matched && Dialect.preset(named: $0.names[0]).map { sameMembers($0, preset) } == true }) {
                rows[i].names.append(preset.preset)
            } else {
                rows.append(([preset.preset], matched, operations))
            }
        }
        if rows.isEmpty {
            out.stdout = "no preset's envelope matches the document's 2xx schemas\n"
            return out
        }
        for row in rows.sorted(by: { $0.matched > $1.matched }) {
            out.stdout += "\(row.names.joined(separator: ", ")): \(row.matched) of \(row.operations) operations\n"
        }
        return out
    }

    private static func sameMembers(_ a: Dialect, _ b: Dialect) -> Bool {
        a.codes == b.codes && a.messages == b.messages && a.payload == b.payload && a.success.path == b.success.path
    }

    private static func failed(_ why: String, _ out: inout Outcome) -> Outcome {
        out.stderr.append("peel openapi: " + why)
        out.code = 2
        return out
    }
}
