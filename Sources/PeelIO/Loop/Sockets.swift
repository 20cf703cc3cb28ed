import CEvent
import Glibc

/// A parsed `HOST:PORT` (IPv6 hosts in brackets), the form every listen option takes.
public struct HostPort: Sendable, Equatable, CustomStringConvertible {
    /// Host name or literal address, without brackets.
    public var host: String
    /// TCP port; 0 asks the kernel for a free one.
    public var port: Int

    /// Creates from parts.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` or `[v6]:port`; nil when malformed.
    public init?(parsing text: String) {
        var host: Substring
        var portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { return nil }
        }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else { return nil }
        self.host = String(host)
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

enum Sockets {
    /// Opens a non-blocking listening socket; SO_REUSEPORT lets every worker bind the same port.
    static func listen(_ address: HostPort, reusePort: Bool, backlog: Int32 = 4096, listening: Bool = true) throws(PeelIOError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(address.host, String(address.port), &hints, &list)
        guard rc == 0, let first = list else { throw PeelIOError(.address, "resolve \(address)") }
        defer { freeaddrinfo(list) }
        let ai = first.pointee
        let fd = socket(ai.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw PeelIOError(.system(errno), "socket") }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, 4)
        if reusePort { setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, 4) }
        // Linux copies TCP_NODELAY from the listener to every accepted socket; so the server never sets it per socket.
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, 4)
        if bind(fd, ai.ai_addr, ai.ai_addrlen) != 0 {
            let e = errno
            close(fd)
            throw PeelIOError(.system(e), "bind \(address)")
        }
        if listening, Glibc.listen(fd, backlog) != 0 {
            let e = errno
            close(fd)
            throw PeelIOError(.system(e), "listen \(address)")
        }
        return fd
    }

    /// Fails with `address in use` when some other socket already listens on `address`. Workers bind
    /// with SO_REUSEPORT, which would otherwise let a second Peel (or anything else) share the
    /// port silently and take part of the traffic; a probe bound without it sees the clash.
    static func ensureNotServed(_ address: HostPort) throws(PeelIOError) {
        guard address.port != 0 else { return }
        let fd = try listen(address, reusePort: false, backlog: 1, listening: false)
        close(fd)
    }

    /// The numeric address of a peer, as text (IPv6 without brackets).
    static func describe(_ address: UnsafeMutablePointer<sockaddr>?, _ length: Int32) -> String {
        guard let address else { return "" }
        // An IPv4 client of a dual-stack `[::]` listener arrives as `::ffff:a.b.c.d` (RFC 4291
        // §2.5.5.2); it is shown, logged and forwarded as the IPv4 address it is.
        if address.pointee.sa_family == sa_family_t(AF_INET6), Int(length) >= MemoryLayout<sockaddr_in6>.size {
            let mapped: [UInt8]? = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { a in
                let b = withUnsafeBytes(of: a.pointee.sin6_addr) { Array($0) }
                return b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xFF && b[11] == 0xFF ? Array(b[12..<16]) : nil
            }
            if let mapped { return IPNetwork.text(mapped) }
        }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let rc = getnameinfo(address, socklen_t(length), &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
        guard rc == 0 else { return "" }
        return String(decoding: host.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The port a bound socket actually got (for port 0).
    static func localPort(_ fd: Int32) -> Int {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        if storage.ss_family == sa_family_t(AF_INET6) {
            return withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
        }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }
}
