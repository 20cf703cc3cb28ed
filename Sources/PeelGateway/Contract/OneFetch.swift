import PeelIO

/// One GET for a command that runs once (`peel openapi URL`), sent as a group's calls are (curl,
/// http or https, the call's timeouts and CA file): a loop and an upstream client of its own, run
/// on the calling thread until the answer.
enum OneFetch {
    static func get(_ url: String, limits: TransferLimits) -> Result<UpstreamResponse, UpstreamFailure> {
        let loop: EventLoop
        let client: UpstreamClient
        do throws(PeelIOError) {
            loop = try EventLoop()
            client = try UpstreamClient(loop: loop, options: UpstreamOptions())
        } catch {
            return .failure(.localResources(error.description))
        }
        var result: Result<UpstreamResponse, UpstreamFailure>?
        loop.defer {
            client.send(UpstreamRequest(method: "GET", target: .url(url), added: [FieldLine("User-Agent", "peel-openapi")], limits: limits)) { r in
                result = r
                loop.stop()
            }
        }
        loop.run()
        return result ?? .failure(.other("the fetch ended without an answer"))
    }
}
