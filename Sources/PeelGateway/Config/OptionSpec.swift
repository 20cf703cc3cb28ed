import Foundation
import PeelEnvelope
import PeelIO

/// A bad configuration: names the option and what was wrong (printed as one line, exit 2).
public struct ConfigError: Error, CustomStringConvertible, Equatable {
    /// The option as the user wrote it (`--timeout`, `PEEL_TIMEOUT` or the config key).
    public var option: String
    /// What was wrong.
    public var problem: String
    public var description: String { "peel: \(option): \(problem)" }
}

/// A value as it arrives from a flag, the environment or the config file.
enum ConfigValue {
    case text(String)
    case list([String])
    /// A JSON array from the config file, its items' types kept (codes tell 0 from "0").
    case array([ConfigJSON])
    /// A JSON object from the config file, its members in order.
    case map([ConfigJSON.Member])
}

/// One option, declared once: its name (from which the flag, the environment variable and the
/// config key are derived), its help, the placeholder of its value, how its effective value is
/// shown, and how a value lands in the config. The default is not written here: it is what `show`
/// gives for `GatewayConfig()`, so `--help`, `check-config` and the README (held to this by a
/// test) all say what the config struct says.
struct OptionSpec: Sendable {
    let name: String
    let help: String
    /// The value's placeholder in `--help` and the README (`SEC`, `BYTES`, `HOST:PORT`, …).
    let value: String
    /// The default in words, for defaults that are not a value of `GatewayConfig()` (`required`, `CPU count`).
    let fixedDefault: String?
    /// The effective value as a JSON fragment (check-config).
    let show: (@Sendable (GatewayConfig) -> String)?
    let apply: @Sendable (inout GatewayConfig, ConfigValue, String) throws(ConfigError) -> Void

    init(name: String, help: String, value: String = "VALUE", fixedDefault: String? = nil,
         show: (@Sendable (GatewayConfig) -> String)? = nil,
         apply: @escaping @Sendable (inout GatewayConfig, ConfigValue, String) throws(ConfigError) -> Void) {
        self.name = name
        self.help = help
        self.value = value
        self.fixedDefault = fixedDefault
        self.show = show
        self.apply = apply
    }

    var flag: String { "--" + name }
    var env: String { "PEEL_" + name.uppercased().replacingOccurrences(of: "-", with: "_") }
    var key: String { name.replacingOccurrences(of: "-", with: "_") }

    /// The default as people read it: `30` for 30.0 s, `a,b` for a list, `none` for nothing.
    var defaultText: String {
        if let fixedDefault { return fixedDefault }
        guard let show else { return "none" }
        var t = show(GatewayConfig())
        if t == "null" || t == "[]" || t == "{}" { return "none" }
        if t.hasPrefix("[") { t = String(t.dropFirst().dropLast()).replacingOccurrences(of: "\"", with: "") }
        if t.hasPrefix("\"") { t = String(t.dropFirst().dropLast()) }
        if t.hasSuffix(".0"), Double(t) != nil { t = String(t.dropLast(2)) }
        return t
    }
}
