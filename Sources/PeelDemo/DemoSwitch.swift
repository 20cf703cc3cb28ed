import Synchronization

/// The demo upstream's play-dead switch, so `make demo` can show what Peel does when its upstream
/// dies without killing a process: `POST /_demo/down` makes every other request get a TCP reset
/// (what a crashed or restarting backend looks like to a client), `POST /_demo/up` ends it.
/// Sent to the demo upstream's own port, never through the gateway (Peel forwards only `/…` paths
/// to it, and the switch would then reset the call that asked for it).
final class DemoSwitch: Sendable {
    private let down = Atomic<Bool>(false)

    /// True while playing dead.
    var isDown: Bool {
        get { down.load(ordering: .sequentiallyConsistent) }
        set { down.store(newValue, ordering: .sequentiallyConsistent) }
    }

    /// The reply that overrides the routes: the switch itself, or a reset while down; nil otherwise.
    func reply(to request: ParsedRequest) -> DemoReply? {
        switch (request.method, request.path) {
        case ("POST", "/_demo/down"):
            isDown = true
            return .respond(.envelope(data: #"{"upstream":"down"}"#))
        case ("POST", "/_demo/up"):
            isDown = false
            return .respond(.envelope(data: #"{"upstream":"up"}"#))
        default:
            return isDown ? .reset : nil
        }
    }
}
