// peel: parse, start workers, wait for a stop signal. Everything else lives in the modules.
import Glibc
import PeelDemo
import PeelGateway
import PeelIO

signal(SIGPIPE, SIG_IGN)
// A file-size limit (ulimit -f) must fail a spool file's write (EFBIG: that call gets 503), not
// kill the process.
signal(SIGXFSZ, SIG_IGN)
ProcessTuning.raiseFileLimit()
// Signals are taken with sigwait on this thread; every thread started later inherits the mask.
Signals.blockHandledSignals()

/// The configuration from `args`, the environment as it is now and the config file they name.
func readConfig(_ args: ArraySlice<String>, defaults: [String: String]) throws(ConfigError) -> GatewayConfig {
    var env = ProcessEnvironment.current
    for (k, v) in defaults where env[k] == nil { env[k] = v }
    return try ConfigLoader.load(arguments: Array(args), environment: env)
}

func loadConfig(_ args: ArraySlice<String>, defaults: [String: String] = [:]) -> GatewayConfig {
    do {
        return try readConfig(args, defaults: defaults)
    } catch {
        fail(error.description)
    }
}

/// Runs until SIGTERM or SIGINT; SIGHUP re-reads `args` (and the file and environment) and applies
/// what it can, SIGUSR1 and SIGUSR2 are logged and ignored.
func runGateway(_ args: ArraySlice<String>, defaults: [String: String] = [:], banner: [String] = []) -> Never {
    let gateway = Gateway(config: loadConfig(args, defaults: defaults))
    do { try gateway.start() } catch { fail("peel: cannot start: \(error)", code: error.isAddressInUse ? 2 : 1) }
    for line in banner { print(line) }
    Output.flush()
    while true {
        let sig = Signals.wait()
        switch sig {
        case SIGHUP:
            EventLogBridge.signal(sig, action: "reload")
            gateway.reload { () throws(ConfigError) in try readConfig(args, defaults: defaults) }
        case SIGTERM, SIGINT:
            EventLogBridge.signal(sig, action: "stop")
            gateway.shutdown()
            exit(0)
        default:
            EventLogBridge.signal(sig, action: "ignored")
        }
    }
}

let args = CommandLine.arguments.dropFirst()
switch args.first {
case "--help", "-h", "help":
    print(ConfigLoader.helpText)
case "--version", "version":
    print("peel \(peelVersion)")
case "dialects":
    print(DialectCatalog.text())
case "check-config":
    let config = loadConfig(args.dropFirst())
    print(ConfigLoader.describe(config))
case "openapi":
    // A one-shot command: Ctrl-C and SIGTERM stop it as they stop any tool.
    Signals.unblockHandledSignals()
    let outcome = ContractCommand.run(Array(args.dropFirst()), environment: ProcessEnvironment.current, read: ContractCommand.readSource(_:limits:))
    print(outcome.stdout, terminator: "")
    for line in outcome.stderr { Output.error(line) }
    Output.flush()
    exit(outcome.code)
case "healthcheck":
    var rest = Array(args.dropFirst())
    var admin = ProcessEnvironment.current["PEEL_ADMIN_LISTEN"] ?? "127.0.0.1:9090"
    if rest.count >= 2, rest[0] == "--admin-listen" { admin = rest[1]; rest.removeFirst(2) }
    guard rest.isEmpty else { fail("peel healthcheck: unexpected argument \(rest[0])") }
    guard admin != "off", var hp = HostPort(parsing: admin) else { fail("peel healthcheck: --admin-listen: \(admin) is not HOST:PORT") }
    if hp.host == "0.0.0.0" { hp.host = "127.0.0.1" }
    if hp.host == "::" { hp.host = "::1" }
    guard let r = BlockingClient.get(host: hp.host, port: hp.port, path: "/healthz"), r.status == 200 else {
        fail("peel healthcheck: \(hp) /healthz did not answer 200", code: 1)
    }
case "demo-upstream":
    var rest = Array(args.dropFirst())
    var listen = ProcessEnvironment.current["PEEL_DEMO_LISTEN"] ?? "127.0.0.1:8081"
    if rest.count >= 2, rest[0] == "--listen" { listen = rest[1]; rest.removeFirst(2) }
    guard rest.isEmpty else { fail("peel demo-upstream: unexpected argument \(rest[0])") }
    guard let hp = HostPort(parsing: listen) else { fail("peel demo-upstream: --listen: \(listen) is not HOST:PORT") }
    do {
        let demo = try DemoUpstream(listen: hp)
        try demo.start()
        print("demo upstream listening on \(HostPort(host: hp.host, port: demo.port))")
        Output.flush()
        _ = Signals.waitForStop()
        demo.stop()
    } catch {
        fail("peel demo-upstream: cannot start: \(error)", code: 1)
    }
case "demo":
    let demo: DemoUpstream
    do {
        demo = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try demo.start()
    } catch {
        fail("peel demo: cannot start the demo upstream: \(error)", code: 1)
    }
    // The demo shows the offline experience too: a stale-answer cache, and probes every
    // second so the upstream going down shows within a few seconds.
    let defaults = ["PEEL_UPSTREAM": demo.baseURL, "PEEL_OFFLINE_CACHE": "16MiB", "PEEL_PROBE_INTERVAL": "1"]
    let config = loadConfig(args.dropFirst(), defaults: defaults)
    let gatewayURL = "http://\(config.listeners.client.host == "0.0.0.0" ? "127.0.0.1" : config.listeners.client.host):\(config.listeners.client.port)"
    var banner = ["peel demo: upstream \(demo.baseURL), gateway \(gatewayURL)", "Try:"]
    banner += DemoCatalog.curlLines(gateway: gatewayURL).map { "  " + $0 }
    banner.append("Offline: the upstream plays dead and comes back on its own port:")
    banner.append("  curl -sN -H 'Accept: text/event-stream' \(gatewayURL)/_peel/reachability &")
    banner.append("  curl -s -X POST \(demo.baseURL)/_demo/down; sleep 4; curl -si \(gatewayURL)/api/user; curl -si \(gatewayURL)/api/items")
    banner.append("  curl -s -X POST \(demo.baseURL)/_demo/up")
    banner.append("Admin: curl -s \(config.listeners.admin.map { "http://\($0.host):\($0.port)" } ?? "(off)")/status")
    runGateway(args.dropFirst(), defaults: defaults, banner: banner)
case .some(let first) where !first.hasPrefix("-"):
    fail("peel: unknown command \(first) (see peel --help)")
default:
    runGateway(args)
}
