import Synchronization

/// One worker's tunnel counts for `/metrics` and `/status`: written by its tunnels on the loop
/// thread, read by the scrape on the admin thread.
public final class TunnelMeter: Sendable {
    /// Tunnels open now (from the 101 relayed to the close).
    public let open = Atomic<Int>(0)
    /// Bytes read from clients and passed to upstreams, as they are read.
    public let bytesFromClient = Atomic<Int>(0)
    /// Bytes read from upstreams and passed to clients, as they are read.
    public let bytesFromUpstream = Atomic<Int>(0)

    /// Zero counts.
    public init() {}
}
