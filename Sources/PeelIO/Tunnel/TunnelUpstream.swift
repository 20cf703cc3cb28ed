import CCurl
import CEvent
import Glibc

/// The upstream end of a tunnel once its 101 came: a connect-only curl handle (CURLOPT_CONNECT_ONLY)
/// in a multi handle of its own, read and written with curl_easy_recv/curl_easy_send, so that TLS
/// to an https endpoint is curl's as it is for calls. The handle stays in its multi until the end:
/// removing it would close the connection, and the worker's shared multi would count the idle
/// connection as its own (and close it as too old or as having unread input).
public final class TunnelUpstream {
    private(set) var multi: UnsafeMutableRawPointer?
    private var easy: UnsafeMutableRawPointer?
    /// The connection's socket (CURLINFO_ACTIVESOCKET), watched by the loop.
    let fd: Int32
    /// Whether the connection is TLS (no half-close through curl then).
    let tls: Bool
    /// Bytes that came after the 101 head (the upstream's first frames), sent to the client first.
    var early: [UInt8]
    /// The most one curl_easy_recv returns: curl reads at most its CURLOPT_BUFFERSIZE from the
    /// socket per call (the dial sets it to this, curl's default), so a read this long may have
    /// left bytes behind.
    static let readCap = 16_384
    /// The 101's fields, in order, as the upstream sent them.
    public let fields: [(name: String, value: String)]

    init(multi: UnsafeMutableRawPointer, easy: UnsafeMutableRawPointer, fd: Int32, tls: Bool, early: [UInt8],
         fields: [(name: String, value: String)]) {
        self.multi = multi
        self.easy = easy
        self.fd = fd
        self.tls = tls
        self.early = early
        self.fields = fields
    }

    /// What one read or write did.
    enum IO: Equatable {
        /// This many bytes moved.
        case moved(Int)
        /// Nothing now: the socket would block.
        case again
        /// The upstream ended its side (a read returned 0).
        case ended
        /// The connection failed (reset, TLS error).
        case failed
    }

    /// Reads up to `count` bytes into `into`.
    func recv(into: UnsafeMutableRawPointer, count: Int) -> IO {
        guard let easy else { return .failed }
        var n = 0
        switch curl_easy_recv(easy, into, count, &n) {
        case CURLE_OK: return n == 0 ? .ended : .moved(n)
        case CURLE_AGAIN: return .again
        default: return .failed
        }
    }

    /// Writes up to `count` bytes from `from`.
    func send(from: UnsafeRawPointer, count: Int) -> IO {
        guard let easy else { return .failed }
        var n = 0
        switch curl_easy_send(easy, from, count, &n) {
        case CURLE_OK: return .moved(n)
        case CURLE_AGAIN: return .again
        default: return .failed
        }
    }

    /// Passes the client's half-close on (plain TCP only; see `TunnelFlow.upstreamHalfCloses`).
    func shutdownWrite() {
        if !tls && easy != nil { shutdown(fd, Int32(SHUT_WR)) }
    }

    /// Closes the connection (curl closes the socket); the loop's events on it must be gone first.
    public func close() {
        if let easy {
            if let multi { _ = curl_multi_remove_handle(multi, easy) }
            curl_easy_cleanup(easy)
        }
        easy = nil
        if let multi { _ = curl_multi_cleanup(multi) }
        multi = nil
    }

    deinit { close() }
}
