import PeelIO

/// A spooled answer compressed while it is sent, as nginx's gzip filter compresses what passes it:
/// read from its file a piece at a time (`ContentStreamEncoder.stepSize`), encoded, and written as
/// the client takes it (chunked, its length unknown until the end). Neither the answer nor its
/// compressed copy is ever whole in memory, and each loop pass compresses one piece at most, then
/// lets the loop wait for I/O, so other connections on the worker are not held up.
final class EncodedFileStream {
    /// Unsent output at which the next piece waits for the client.
    static let highWater = 262_144

    private let file: SpooledBody
    private let pieces: [FilePiece]
    private var index = 0
    /// How far into the file range `pieces[index]` has been read.
    private var offset = 0
    private let encoder: ContentStreamEncoder
    private let stream: ReplyStream
    /// The encoder's memory, charged to the budget until the stream ends.
    private let hold: BudgetHold?
    private var next: LoopTimer?
    private let ended: (_ sent: Int, _ complete: Bool) -> Void

    /// A stream of `pieces` of `file` through `encoder` into `stream` on `loop`; `ended` runs once,
    /// with the bytes written and whether the body was whole, unless the client leaves first (the
    /// stream's `onClientGone`, which the caller sets).
    init(file: SpooledBody, pieces: [FilePiece], encoder: ContentStreamEncoder, stream: ReplyStream, hold: BudgetHold?,
         loop: EventLoop, ended: @escaping (_ sent: Int, _ complete: Bool) -> Void) {
        self.file = file
        self.pieces = pieces
        self.encoder = encoder
        self.stream = stream
        self.hold = hold
        self.ended = ended
        next = LoopTimer(loop: loop) { [weak self] in self?.step() }
    }

    /// Compressed bytes written so far.
    var sent: Int { encoder.produced }

    /// Memory one stream in `coding` holds: the encoder's state, its input piece and the output it may queue.
    static func memory(_ coding: ContentCoding, brotliQuality: Int32) -> Int {
        ContentStreamEncoder.stateBytes(for: coding, brotliQuality: brotliQuality) + ContentStreamEncoder.stepSize + highWater
    }

    /// Writes the first piece; the rest follow on later loop passes, or once the client has taken
    /// what is queued.
    func start() {
        stream.onDrained = { [self] in later() }
        step()
    }

    /// The next piece after the loop has waited for I/O once (a zero timeout fires after the
    /// poll; a deferred job would run before it).
    private func later() {
        guard stream.isOpen, let next, !next.isArmed else { return }
        next.arm(seconds: 0)
    }

    private func step() {
        guard stream.isOpen, stream.bufferedBytes < Self.highWater else { return }
        guard index < pieces.count else { return end(complete: encoder.finish(into: stream)) }
        switch pieces[index] {
        case .bytes(let b):
            guard encoder.encode(b, into: stream) else { return end(complete: false) }
            index += 1
        case .file(let range):
            // A file that ends early or cannot be read, or a library failure: the body cannot be completed.
            guard let n = encoder.encode(file, at: range.lowerBound + offset, upTo: range.count - offset, into: stream) else {
                return end(complete: false)
            }
            offset += n
            if offset == range.count {
                index += 1
                offset = 0
            }
        }
        // More now if the client keeps up; otherwise its draining asks for the next piece.
        if stream.bufferedBytes < Self.highWater { later() }
    }

    private func end(complete: Bool) {
        guard stream.isOpen else { return }
        next = nil
        // Counted before the end is written, as every answer is.
        ended(sent, complete)
        if complete { stream.finish() } else { stream.abort() }
    }
}
