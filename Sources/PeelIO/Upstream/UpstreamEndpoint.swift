import CCurl
import Synchronization

/// One upstream address calls can go to: its origin parsed once into curl's URL form (CURLOPT_CURLU)
/// and the base path joined before every target. Immutable once made, so one endpoint serves every
/// worker: libcurl only reads a CURLU it is handed (it duplicates it per transfer), and two threads
/// reading one are safe.
public final class UpstreamEndpoint: @unchecked Sendable, CustomStringConvertible {
    /// `scheme://host[:port]`.
    public let origin: String
    /// The path every target is joined to ("" for none; no trailing slash).
    public let basePath: String
    /// The origin as curl parsed it.
    let url: OpaquePointer
    /// Set when a reload removed this origin (`UpstreamClient.keepConnections`).
    private let retired = Atomic<Bool>(false)
    /// Whether a reload removed this origin: a connection to it is not kept once its call is done.
    var isRetired: Bool { retired.load(ordering: .relaxed) }

    /// Parses `origin` with curl's URL parser; throws what curl refused (CURLE_URL_MALFORMAT, or
    /// CURLE_OUT_OF_MEMORY), naming the call.
    public init(origin: String, basePath: String = "") throws(PeelIOError) {
        guard let u = curl_url() else { throw curlError(CURLE_OUT_OF_MEMORY, "curl_url") }
        let rc = curl_url_set(u, CURLUPART_URL, origin, 0)
        if rc != CURLUE_OK {
            curl_url_cleanup(u)
            // PeelIOError has no CURLUcode source; CURLE_URL_MALFORMAT is what a transfer reports for
            // a URL curl's parser refuses.
            throw curlError(rc == CURLUE_OUT_OF_MEMORY ? CURLE_OUT_OF_MEMORY : CURLE_URL_MALFORMAT,
                            "curl_url_set(CURLUPART_URL, \(origin))")
        }
        url = u
        self.origin = origin
        self.basePath = basePath
    }

    deinit { curl_url_cleanup(url) }

    /// Marks the origin removed by a reload.
    func retire() { retired.store(true, ordering: .relaxed) }

    public var description: String { origin + basePath }
}
