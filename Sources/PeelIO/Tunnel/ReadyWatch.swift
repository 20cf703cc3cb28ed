import CEvent

/// One descriptor's readiness for one direction, as a one-shot libevent event that runs `action`
/// when it fires; armed again by whoever found the descriptor would block. Freed with its owner,
/// which keeps it alive while it may fire (its event holds an unretained pointer to it).
final class ReadyWatch {
    private var event: OpaquePointer?
    private let action: () -> Void
    private(set) var armed = false

    /// Watches `fd` for `flags` (EV_READ or EV_WRITE) on `loop`; disarmed until `arm`.
    init?(loop: EventLoop, fd: Int32, flags: Int16, _ action: @escaping () -> Void) {
        self.action = action
        event = event_new(loop.base, fd, flags, { _, _, arg in
            let w = Unmanaged<ReadyWatch>.fromOpaque(arg!).takeUnretainedValue()
            w.armed = false
            w.action()
        }, Unmanaged.passUnretained(self).toOpaque())
        if event == nil { return nil }
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
