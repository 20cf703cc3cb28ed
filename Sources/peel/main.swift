// peel: parse, start workers, wait for a stop signal. Everything else lives in the modules.
import Glibc
import PeelDemo
import PeelGateway
import PeelIO

signal(SIGPIPE, SIG_IGN)
ProcessTuning.raiseFileLimit()
// Stop signals are taken with sigwait on this thread; every thread started later inherits the mask.
Signals.blockStopSignals()

func loadConfig(_ args: ArraySlice<String>, defaults: [String: String] = [:]) -> GatewayConfig {
    var env = ProcessEnvironment.current
    for (k, v) in defaults where env[k] == nil { env[k] = v }
    do {
        return try ConfigLoader.load(arguments: Array(args), environment: env)
    } catch {
        fail(error.description)
    }
}

func runGateway(_ config: GatewayConfig, banner: [String] = []) -> Never {
    let gateway = Gateway(config: config)
    do { try gateway.start() } catch { fail("peel: cannot start: \(error)", code: error.isAddressInUse ? 2 : 1) }
    for line in banner { print(line) }
    Output.flush()
    let sig = Signals.waitForStop()
    EventLogBridge.signal(sig)
    gateway.shutdown()
    exit(0)
}

let args = CommandLine.arguments.dropFirst()
switch args.first {
case "--help", "-h", "help":
    print(ConfigLoader.helpText)
case "--version", "version":
    print("peel \(peelVersion)")
case "check-config":
    let config = loadConfig(args.dropFirst())
    print(ConfigLoader.describe(config))
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
    // The demo shows the offline experience too (issue 13): a stale-answer cache, and probes every
    // second so the upstream going down shows within a few seconds.
    let config = loadConfig(args.dropFirst(), defaults: ["PEEL_UPSTREAM": demo.baseURL, "PEEL_OFFLINE_CACHE": "16MiB",
                                                         "PEEL_PROBE_INTERVAL": "1"])
    let gatewayURL = "http://\(config.listen.host == "0.0.0.0" ? "127.0.0.1" : config.listen.host):\(config.listen.port)"
    var banner = ["peel demo: upstream \(demo.baseURL), gateway \(gatewayURL)", "Try:"]
    banner += DemoCatalog.curlLines(gateway: gatewayURL).map { "  " + $0 }
    banner.append("Offline: the upstream plays dead and comes back on its own port:")
    banner.append("  curl -sN -H 'Accept: text/event-stream' \(gatewayURL)/_peel/reachability &")
    banner.append("  curl -s -X POST \(demo.baseURL)/_demo/down; sleep 4; curl -si \(gatewayURL)/api/user; curl -si \(gatewayURL)/api/items")
    banner.append("  curl -s -X POST \(demo.baseURL)/_demo/up")
    banner.append("Admin: curl -s \(config.adminListen.map { "http://\($0.host):\($0.port)" } ?? "(off)")/status")
    runGateway(config, banner: banner)
case .some(let first) where !first.hasPrefix("-"):
    fail("peel: unknown command \(first) (see peel --help)")
default:
    runGateway(loadConfig(args))
}
