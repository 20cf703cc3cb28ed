/// A streamed answer in progress: its head is out, its body goes in pieces. Back-pressure is the
/// writer's to apply: write while `bufferedBytes` is small, otherwise wait for `onDrained`.
public final class ReplyStream {
    private weak var connection: ClientConnection?
    /// True until `finish` ran or the client left.
    public private(set) var isOpen = true
    /// Runs each time everything written so far has reached the kernel.
    public var onDrained: (() -> Void)?
    /// Runs once if the client leaves before `finish` (stop producing here).
    public var onClientGone: (() -> Void)?

    init(connection: ClientConnection) { self.connection = connection }

    /// Bytes written and not yet taken by the kernel.
    public var bufferedBytes: Int { connection?.pendingOutput ?? 0 }

    /// Sends `bytes` as the next piece of the body.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard isOpen, bytes.count > 0 else { return }
        connection?.streamWrite(bytes)
    }

    /// Sends `bytes` as the next piece of the body.
    public func write(_ bytes: [UInt8]) { bytes.withUnsafeBytes { write($0) } }

    /// Ends the body; the connection goes on to the next request (or closes, for HTTP/1.0).
    public func finish() {
        guard isOpen else { return }
        isOpen = false
        onDrained = nil
        onClientGone = nil
        connection?.streamFinish()
    }

    /// Ends the answer unfinished: the connection closes without the body's end, so the client can
    /// tell the body is cut short (RFC 9112 §8: an incomplete chunked message).
    public func abort() {
        guard isOpen else { return }
        isOpen = false
        onDrained = nil
        onClientGone = nil
        connection?.streamAbort()
    }

    func drained() { onDrained?() }

    func clientLeft() {
        guard isOpen else { return }
        isOpen = false
        onDrained = nil
        let callback = onClientGone
        onClientGone = nil
        callback?()
    }
}
