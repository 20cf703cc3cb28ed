import CCurl
import Glibc

/// A failure in the C floor, with where it happened: the one place C status codes become Swift errors.
public struct PeelIOError: Error, CustomStringConvertible, Sendable {
    /// Which library or layer failed.
    public enum Source: Sendable, Equatable {
        case libevent
        case system(Int32)
        case curl(Int32)
        case curlMulti(Int32)
        case address
    }
    /// Which library failed, with its code.
    public let source: Source
    /// The call or step that failed.
    public let site: String

    init(_ source: Source, _ site: String) {
        self.source = source
        self.site = site
    }

    /// True when a listen address is already served (a configuration error: exit 2).
    public var isAddressInUse: Bool { source == .system(EADDRINUSE) }

    public var description: String {
        switch source {
        case .libevent: return "\(site): libevent failed"
        case .system(let e): return "\(site): \(String(cString: strerror(e)))"
        case .curl(let c): return "\(site): \(String(cString: curl_easy_strerror(CURLcode(UInt32(c)))))"
        case .curlMulti(let c): return "\(site): \(String(cString: curl_multi_strerror(CURLMcode(c))))"
        case .address: return "\(site): not a valid HOST:PORT"
        }
    }
}
