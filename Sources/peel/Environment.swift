import Glibc
import PeelGateway

/// The process environment as a dictionary (no Foundation in the executable).
enum ProcessEnvironment {
    static var current: [String: String] {
        var out: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { out[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return out
    }
}

/// Logs the stop signal as an event line.
enum EventLogBridge {
    static func signal(_ sig: Int32) {
        EventLog.emit("signal", [("signal", sig == SIGTERM ? "\"SIGTERM\"" : "\"SIGINT\"")])
    }
}

/// Blocking and waiting for SIGTERM/SIGINT.
enum Signals {
    private static func stopSet() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        return set
    }

    static func blockStopSignals() {
        var set = stopSet()
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    static func waitForStop() -> Int32 {
        var set = stopSet()
        var sig: Int32 = 0
        sigwait(&set, &sig)
        return sig
    }
}

/// Standard output flushing without touching C's global FILE pointers.
enum Output {
    static func flush() { fflush(nil) }
}

/// Prints a one-line error on stderr and exits.
func fail(_ message: String, code: Int32 = 2) -> Never {
    let line = Array((message + "\n").utf8)
    line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
    exit(code)
}
