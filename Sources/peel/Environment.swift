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

/// Logs a signal as an event line, with what Peel does about it.
enum EventLogBridge {
    static func signal(_ sig: Int32, action: String) {
        EventLog.emit("signal", [("signal", "\"\(Signals.name(sig))\""), ("action", "\"\(action)\"")])
    }
}

/// The signals Peel handles, taken with sigwait on the main thread: SIGTERM and SIGINT stop,
/// SIGHUP reloads, SIGUSR1 and SIGUSR2 are ignored. Left to their default action, the last three
/// would kill the process at once (a closing terminal or a log rotator is enough).
enum Signals {
    private static func handledSet() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2] { sigaddset(&set, s) }
        return set
    }

    /// Blocks the handled signals in this thread and every thread started after it.
    static func blockHandledSignals() {
        var set = handledSet()
        let rc = pthread_sigmask(SIG_BLOCK, &set, nil)
        if rc != 0 { fail("peel: pthread_sigmask: \(String(cString: strerror(rc)))", code: 1) }
    }

    /// Lets the handled signals act as they do by default again (a command that does not serve).
    static func unblockHandledSignals() {
        var set = handledSet()
        let rc = pthread_sigmask(SIG_UNBLOCK, &set, nil)
        if rc != 0 { fail("peel: pthread_sigmask: \(String(cString: strerror(rc)))", code: 1) }
    }

    /// The next handled signal.
    static func wait() -> Int32 {
        var set = handledSet()
        var sig: Int32 = 0
        // sigwait fails only with EINVAL for an invalid set; retried so a stop is never missed.
        while sigwait(&set, &sig) != 0 {}
        return sig
    }

    /// Waits until SIGTERM or SIGINT, logging any other handled signal as ignored.
    static func waitForStop() -> Int32 {
        while true {
            let sig = wait()
            if sig == SIGTERM || sig == SIGINT { return sig }
            EventLogBridge.signal(sig, action: "ignored")
        }
    }

    static func name(_ sig: Int32) -> String {
        switch sig {
        case SIGTERM: return "SIGTERM"
        case SIGINT: return "SIGINT"
        case SIGHUP: return "SIGHUP"
        case SIGUSR1: return "SIGUSR1"
        case SIGUSR2: return "SIGUSR2"
        default: return "signal \(sig)"
        }
    }
}

/// Standard output flushing without touching C's global FILE pointers.
enum Output {
    static func flush() { fflush(nil) }

    /// One line on standard error.
    static func error(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        bytes.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
    }
}

/// Prints a one-line error on stderr and exits.
func fail(_ message: String, code: Int32 = 2) -> Never {
    // Events already queued (a start that failed half-way) go out before this line.
    LogSinks.flush(timeout: 1)
    let line = Array((message + "\n").utf8)
    line.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
    exit(code)
}
