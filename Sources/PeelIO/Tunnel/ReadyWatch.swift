import CEvent

/// One descriptor's readiness for one direction, as a libevent event that runs `action` when it
/// fires: one-shot, armed again by whoever found the descriptor would block; or, `edge`, armed
/// once and firing each time the descriptor becomes ready again (EV_ET), so a reader that keeps
/// its own "may be ready" flag costs no epoll_ctl per read. Freed with its owner, which keeps it
/// alive while it may fire (its event holds an unretained pointer to it).
final class ReadyWatch {
    private var event: OpaquePointer?
    private let action: () -> Void
    private let edge: Bool
    private(set) var armed = false
    /// Set once an edge read watch saw the peer's FIN: reads go on until they return 0.
    private(set) var peerClosed = false

    /// Watches `fd` for `flags` (EV_READ or EV_WRITE) on `loop`; disarmed until `arm`.
    init?(loop: EventLoop, fd: Int32, flags: Int16, edge: Bool = false, _ action: @escaping () -> Void) {
        self.action = action
        self.edge = edge
        // An edge read watch asks for the peer's FIN too (EV_CLOSED, EPOLLRDHUP): a FIN that came
        // with the last bytes makes no edge of its own after a read that took them.
        let reads = flags & Int16(EV_READ) != 0
        let kind = edge ? flags | Int16(EV_ET | EV_PERSIST) | (reads ? Int16(EV_CLOSED) : 0) : flags
        event = event_new(loop.base, fd, kind, { _, events, arg in
            let w = Unmanaged<ReadyWatch>.fromOpaque(arg!).takeUnretainedValue()
            if !w.edge { w.armed = false }
            if events & Int16(EV_CLOSED) != 0 { w.peerClosed = true }
            w.action()
        }, Unmanaged.passUnretained(self).toOpaque())
        if event == nil { return nil }
    }

    /// Whether `loop`'s backend can watch edges and the peer's FIN (epoll can; poll and select cannot).
    static func edgesWork(on loop: EventLoop) -> Bool {
        let needed = Int32(EV_FEATURE_ET.rawValue | EV_FEATURE_EARLY_CLOSE.rawValue)
        return Int32(event_base_get_features(loop.base)) & needed == needed
    }

    /// Fires once when the descriptor is ready (again).
    func arm() {
        guard !armed, let event else { return }
        armed = event_add(event, nil) == 0
    }

    /// Stops watching; the event stays for a later `arm`.
    func disarm() {
        guard armed, let event else { return }
        event_del(event)
        armed = false
    }

    deinit { if let event { event_free(event) } }
}
