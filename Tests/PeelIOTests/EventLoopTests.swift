import Dispatch
import Foundation
import PeelIO
import Synchronization
import XCTest

/// The event loop's cross-thread entry point, its deferred queue and its timers.
final class EventLoopTests: XCTestCase {
    /// Keeps loop-thread objects alive between jobs; only the loop thread touches `value`.
    private final class LoopBox<T>: @unchecked Sendable {
        var value: T?
    }

    func testExecute_fromAnotherThreadRunsOnTheLoopThread() throws {
        let loop = try EventLoop()
        loop.startThread()
        let done = DispatchSemaphore(value: 0)
        let onLoop = Atomic<Bool>(false)
        let callerThread = pthread_self()
        let ranElsewhere = Atomic<Bool>(false)
        loop.execute {
            onLoop.store(loop.inLoopThread, ordering: .sequentiallyConsistent)
            ranElsewhere.store(pthread_equal(pthread_self(), callerThread) == 0, ordering: .sequentiallyConsistent)
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 2), .success)
        XCTAssertTrue(onLoop.load(ordering: .sequentiallyConsistent))
        XCTAssertTrue(ranElsewhere.load(ordering: .sequentiallyConsistent))
        XCTAssertFalse(loop.inLoopThread)
        loop.stop()
        loop.join()
    }

    func testExecute_keepsTheOrderJobsWereQueuedIn() throws {
        let loop = try EventLoop()
        let seen = Locked<[Int]>([])
        for i in 0..<100 { loop.execute { seen.withLock { $0.append(i) } } }
        loop.startThread()
        let done = DispatchSemaphore(value: 0)
        loop.execute { done.signal() }
        XCTAssertEqual(done.wait(timeout: .now() + 2), .success)
        XCTAssertEqual(seen.withLock { $0 }, Array(0..<100))
        loop.stop()
        loop.join()
    }

    func testDefer_runsAfterTheCurrentJob() throws {
        let loop = try EventLoop()
        loop.startThread()
        let order = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            order.withLock { $0.append("a") }
            loop.defer {
                order.withLock { $0.append("c") }
                done.signal()
            }
            order.withLock { $0.append("b") }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 2), .success)
        XCTAssertEqual(order.withLock { $0 }, ["a", "b", "c"])
        loop.stop()
        loop.join()
    }

    func testLoopTimer_firesOnceAfterItsDelayAndCanBeCancelled() throws {
        let loop = try EventLoop()
        loop.startThread()
        let fired = Atomic<Int>(0)
        let cancelledFired = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        let timers = LoopBox<[LoopTimer]>()
        let started = Date()
        loop.execute {
            let timer = LoopTimer(loop: loop) {
                fired.add(1, ordering: .sequentiallyConsistent)
                done.signal()
            }
            let cancelled = LoopTimer(loop: loop) { cancelledFired.add(1, ordering: .sequentiallyConsistent) }
            timer.arm(seconds: 0.1)
            cancelled.arm(seconds: 0.05)
            cancelled.cancel()
            timers.value = [timer, cancelled]
        }
        XCTAssertEqual(done.wait(timeout: .now() + 2), .success)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.09)
        usleep(100_000)
        XCTAssertEqual(fired.load(ordering: .sequentiallyConsistent), 1)
        XCTAssertEqual(cancelledFired.load(ordering: .sequentiallyConsistent), 0)
        let released = DispatchSemaphore(value: 0)
        loop.execute {
            timers.value = nil
            released.signal()
        }
        XCTAssertEqual(released.wait(timeout: .now() + 2), .success)
        loop.stop()
        loop.join()
    }

    func testStop_fromAnotherThreadEndsRun() throws {
        let loop = try EventLoop()
        loop.startThread()
        let joined = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            loop.stop()
            loop.join()
            joined.signal()
        }
        XCTAssertEqual(joined.wait(timeout: .now() + 2), .success)
    }
}
