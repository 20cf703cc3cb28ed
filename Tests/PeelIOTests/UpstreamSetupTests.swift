import Dispatch
import Foundation
import PeelDemo
@testable import PeelIO
import XCTest

/// A curl_easy_setopt that curl refuses fails the one call through its completion, naming the option.
final class UpstreamSetupTests: DemoTestCase {
    /// What the loop thread saw, read by the test thread after `done`.
    private final class Seen: @unchecked Sendable {
        var client: UpstreamClient?
        var results: [Result<UpstreamResponse, UpstreamFailure>] = []
        var sendReturnedFirst = true
        var pooledAfterFailure = -1
        var inFlightAfterFailure = -1
    }

    /// Runs `start` on a fresh loop with a client for `options`; `start` signals `done` when finished.
    private func onLoop(_ options: UpstreamOptions,
                        _ start: @escaping @Sendable (UpstreamClient, Seen, @escaping () -> Void) -> Void) throws -> Seen {
        let loop = try EventLoop()
        loop.startThread()
        let seen = Seen()
        let done = DispatchSemaphore(value: 0)
        let setUp = Locked<String?>(nil)
        loop.execute {
            do {
                let client = try UpstreamClient(loop: loop, options: options)
                seen.client = client
                start(client, seen) { done.signal() }
            } catch {
                setUp.withLock { $0 = "\(error)" }
                done.signal()
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertNil(setUp.withLock { $0 })
        let released = DispatchSemaphore(value: 0)
        loop.execute {
            seen.client = nil
            released.signal()
        }
        XCTAssertEqual(released.wait(timeout: .now() + 2), .success)
        loop.stop()
        loop.join()
        return seen
    }

    // curl 7.88 refuses a negative CURLOPT_MAXFILESIZE_LARGE with CURLE_BAD_FUNCTION_ARGUMENT.
    func testHandleSetup_optionCurlRefusesFailsTheCallNamingTheOption() throws {
        var options = UpstreamOptions()
        // curl refuses string options longer than CURL_MAX_INPUT_LENGTH (8,000,000 bytes).
        options.caFile = String(repeating: "a", count: 8_000_001)
        let seen = try onLoop(options) { client, seen, done in
            var returned = false
            client.send(UpstreamRequest(method: "GET", target: .url("http://127.0.0.1:1/"))) { result in
                seen.sendReturnedFirst = returned
                seen.results.append(result)
                seen.pooledAfterFailure = client.freeHandles.count
                seen.inFlightAfterFailure = client.inFlight
                done()
            }
            returned = true
        }
        XCTAssertEqual(seen.results.count, 1)
        guard case .failure(let failure)? = seen.results.first else { return XCTFail("expected a failure: \(seen.results)") }
        XCTAssertEqual(failure, .other("curl_easy_setopt(CURLOPT_CAINFO): A libcurl function was given a bad argument"))
        XCTAssertEqual(failure.reason, "other")
        XCTAssertTrue(seen.sendReturnedFirst, "the completion ran inside send")
        XCTAssertEqual(seen.pooledAfterFailure, 0, "a handle that failed its setup must not be pooled")
        XCTAssertEqual(seen.inFlightAfterFailure, 0)
    }

    // curl refuses string options longer than CURL_MAX_INPUT_LENGTH (8,000,000 bytes).
    func testRequestTarget_curlRefusesFailsThatCallAloneAndPoolsTheHandle() throws {
        let options = UpstreamOptions()
        let endpoint = try UpstreamEndpoint(origin: upstream.baseURL)
        let hugePath = "/" + String(repeating: "a", count: 8_000_000)
        let seen = try onLoop(options) { client, seen, done in
            var returned = false
            client.send(UpstreamRequest(method: "GET", target: .origin(endpoint, path: hugePath, query: nil))) { result in
                seen.sendReturnedFirst = returned
                seen.results.append(result)
                seen.pooledAfterFailure = client.freeHandles.count
                seen.inFlightAfterFailure = client.inFlight
                // The same handle carries the next call.
                client.send(UpstreamRequest(method: "GET", target: .origin(endpoint, path: "/api/user", query: nil))) { result in
                    seen.results.append(result)
                    done()
                }
            }
            returned = true
        }
        XCTAssertEqual(seen.results.count, 2)
        guard case .failure(let failure)? = seen.results.first else { return XCTFail("expected a failure: \(seen.results)") }
        XCTAssertEqual(failure, .other("curl_easy_setopt(CURLOPT_REQUEST_TARGET): A libcurl function was given a bad argument"))
        XCTAssertTrue(seen.sendReturnedFirst, "the completion ran inside send")
        XCTAssertEqual(seen.pooledAfterFailure, 1, "the handle went back to the pool")
        XCTAssertEqual(seen.inFlightAfterFailure, 0)
        guard case .success(let response)? = seen.results.last else { return XCTFail("expected an answer: \(seen.results)") }
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(upstream.requestCount, 1, "only the second call may reach the upstream")
    }

    /// A call that should have been answered, as the error that fails the test.
    private struct CallFailed: Error { let result: String }

    // One pooled handle carries calls to two endpoints in turn, and a whole URL between them: each
    // call reaches its own endpoint, with that endpoint's base path (curl 7.88 keeps the URL it read
    // from the first CURLU unless told to read again).
    func testOneHandle_alternatesBetweenEndpoints_eachWithItsBasePath() throws {
        let other = try DemoUpstream(listen: HostPort(host: "127.0.0.1", port: 0))
        try other.start()
        defer { other.stop() }
        let a = try UpstreamEndpoint(origin: upstream.baseURL)
        let b = try UpstreamEndpoint(origin: other.baseURL, basePath: "/api")
        let calls: [UpstreamTarget] = [.origin(a, path: "/api/echo/1", query: "x=1"), .origin(b, path: "/echo/2", query: nil),
                                       .origin(a, path: "/api/echo/3", query: nil), .url(other.baseURL + "/api/echo/4"),
                                       .origin(a, path: "/api/echo/5", query: nil), .origin(b, path: "/echo/%C3%A9", query: "s=%C3%A9")]
        let pooled = Locked<[Int]>([])
        let seen = try onLoop(UpstreamOptions()) { client, seen, done in
            func next(_ i: Int) {
                guard i < calls.count else { return done() }
                client.send(UpstreamRequest(method: "GET", target: calls[i])) { result in
                    seen.results.append(result)
                    pooled.withLock { $0.append(client.freeHandles.count) }
                    next(i + 1)
                }
            }
            next(0)
        }
        let targets = try seen.results.map { result -> String in
            guard case .success(let r) = result else { throw CallFailed(result: "\(result)") }
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])
            let data = try XCTUnwrap(object["data"] as? [String: Any])
            return try XCTUnwrap(data["target"] as? String)
        }
        XCTAssertEqual(targets, ["/api/echo/1?x=1", "/api/echo/2", "/api/echo/3", "/api/echo/4", "/api/echo/5",
                                 "/api/echo/%C3%A9?s=%C3%A9"])
        XCTAssertEqual(upstream.requestCount, 3)
        XCTAssertEqual(other.requestCount, 3)
        XCTAssertEqual(pooled.withLock { $0 }, [1, 1, 1, 1, 1, 1], "one handle carried every call")
    }

    // A call's own timeout (its group's) applies to it alone: the pooled handle carries the next
    // call with the client's timeout again.
    func testACallsOwnTimeout_appliesToItAlone() throws {
        let endpoint = try UpstreamEndpoint(origin: upstream.baseURL)
        let slow = UpstreamTarget.origin(endpoint, path: "/api/slow", query: "ms=1200")
        let seen = try onLoop(UpstreamOptions()) { client, seen, done in
            client.send(UpstreamRequest(method: "GET", target: slow, limits: TransferLimits(timeout: 0.5, connectTimeout: 0.5))) { first in
                seen.results.append(first)
                client.send(UpstreamRequest(method: "GET", target: slow)) { second in
                    seen.results.append(second)
                    seen.pooledAfterFailure = client.freeHandles.count
                    done()
                }
            }
        }
        XCTAssertEqual(seen.results.count, 2)
        guard case .failure(.timeout)? = seen.results.first else { return XCTFail("the first call's 0.5 s: \(seen.results)") }
        guard case .success(let r)? = seen.results.last else { return XCTFail("the client's 30 s again: \(seen.results)") }
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(seen.pooledAfterFailure, 1, "one handle carried both")
    }

    // A timeout on a reused connection is a timeout waiting for the answer, not a connect timeout:
    // libcurl reports a connect time of 0 for a connection it did not make (review of issue 27).
    func testATimeoutOnAReusedConnection_isNoConnectTimeout() throws {
        let endpoint = try UpstreamEndpoint(origin: upstream.baseURL)
        var options = UpstreamOptions()
        options.timeout = 0.3
        let seen = try onLoop(options) { client, seen, done in
            // The first call makes the connection, with room for a busy machine; the second reuses it.
            let roomy = TransferLimits(timeout: 10, connectTimeout: 10)
            client.send(UpstreamRequest(method: "GET", target: .origin(endpoint, path: "/api/user", query: nil), limits: roomy)) { first in
                seen.results.append(first)
                client.send(UpstreamRequest(method: "GET", target: .origin(endpoint, path: "/api/slow", query: "ms=1500"))) { second in
                    seen.results.append(second)
                    done()
                }
            }
        }
        guard case .success? = seen.results.first else { return XCTFail("\(seen.results)") }
        guard case .failure(let f)? = seen.results.last else { return XCTFail("\(seen.results)") }
        XCTAssertEqual(f.reason, "timeout", "\(f)")
    }

    func testFailedSetup_cancelledBeforeTheNextPassStaysSilent() throws {
        var options = UpstreamOptions()
        options.maxResponseBody = -1
        let seen = try onLoop(options) { client, seen, done in
            let transfer = client.send(UpstreamRequest(method: "GET", target: .url("http://127.0.0.1:1/"))) { result in
                seen.results.append(result)
            }
            transfer.cancel()
            // Two passes later the failure would have been delivered.
            client.loop.defer { client.loop.defer { done() } }
        }
        XCTAssertEqual(seen.results.count, 0)
    }

    // A call's own body limit holds over the client's (a reload lowered or raised it after the
    // call was planned: the call keeps its generation's).
    func testACallsOwnBodyLimit_holdsOverTheClients() throws {
        let endpoint = try UpstreamEndpoint(origin: upstream.baseURL)
        var options = UpstreamOptions()
        options.maxResponseBody = 10_000_000
        let seen = try onLoop(options) { client, seen, done in
            let small = TransferLimits(timeout: 10, connectTimeout: 10, maxResponseBody: 100)
            client.send(UpstreamRequest(method: "GET", target: .origin(endpoint, path: "/api/large", query: "kb=4"), limits: small)) { first in
                seen.results.append(first)
                client.send(UpstreamRequest(method: "GET", target: .origin(endpoint, path: "/api/large", query: "kb=4"))) { second in
                    seen.results.append(second)
                    done()
                }
            }
        }
        guard case .failure(.tooLarge)? = seen.results.first else { return XCTFail("the call's 100 bytes: \(seen.results)") }
        guard case .success(let r)? = seen.results.last else { return XCTFail("the client's 10 MB again: \(seen.results)") }
        XCTAssertGreaterThan(r.body.count, 100)
    }
}

