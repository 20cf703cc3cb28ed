import Foundation
@testable import PeelGateway

/// Loads a configuration the way `peel` does: `arguments` as flags, `environment`, and `file` (when
/// given) written to a temporary file that `PEEL_CONFIG` names, removed afterwards.
func loadConfig(_ arguments: [String] = [], file: String?, environment: [String: String]) throws -> GatewayConfig {
    var env = environment
    var url: URL?
    if let file {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("peel-config-\(getpid())-\(UUID().uuidString).json")
        try Data(file.utf8).write(to: url!)
        env["PEEL_CONFIG"] = url!.path
    }
    defer { if let url { try? FileManager.default.removeItem(at: url) } }
    return try ConfigLoader.load(arguments: arguments, environment: env)
}
