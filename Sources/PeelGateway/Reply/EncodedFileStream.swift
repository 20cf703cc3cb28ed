import PeelIO

/// A spooled answer compressed while it is sent, as nginx's gzip filter compresses what passes it:
/// read from its file a piece at a time, encoded, and written as the client takes it (chunked, its
/// length unknown until the end). Neither the answer nor its compressed copy is ever whole in
/// memory, and no loop pass compresses more than one piece.
final class EncodedFileStream {
    /// Bytes of the file read and compressed per step (about a millisecond at gzip level 3).
    static let step = 131_072
    /// Unsent output at which the next step waits for the client.
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
    private var input: [UInt8]
    private var running = false
    /// Compressed bytes written so far.
    private(set) var sent = 0
    private let ended: (_ sent: Int, _ complete: Bool) -> Void

    /// A stream of `pieces` of `file` through `encoder` into `stream`; `ended` runs once, with the
    /// bytes written and whether the body was whole, unless the client leaves first (the stream's
    /// `onClientGone`, which the caller sets).
    init(file: SpooledBody, pieces: [FilePiece], encoder: ContentStreamEncoder, stream: ReplyStream, hold: BudgetHold?,
         ended: @escaping (_ sent: Int, _ complete: Bool) -> Void) {
        self.file = file
        self.pieces = pieces
        self.encoder = encoder
        self.stream = stream
        self.hold = hold
        self.ended = ended
        input = [UInt8](repeating: 0, count: Self.step)
    }

    /// Memory one stream in `coding` holds: the encoder's state, its input piece and the output it may queue.
    static func memory(_ coding: ContentCoding) -> Int { ContentStreamEncoder.stateBytes(for: coding) + step + highWater }

    /// Writes until the client stops taking, then again each time it has taken everything.
    func start() {
        stream.onDrained = { [self] in pump() }
        pump()
    }

    private func pump() {
        // A write that drains at once calls back into `pump` from inside the loop: the loop goes on.
        guard !running else { return }
        running = true
        defer { running = false }
        while stream.isOpen && stream.bufferedBytes < Self.highWater {
            guard index < pieces.count else {
                let ok = encoder.encode(UnsafeRawBufferPointer(start: nil, count: 0), finish: true, emit: write)
                return end(complete: ok)
            }
            let ok: Bool
            switch pieces[index] {
            case .bytes(let b):
                ok = b.withUnsafeBytes { encoder.encode($0, finish: false, emit: write) }
                index += 1
            case .file(let range):
                let want = min(Self.step, range.count - offset)
                let n = want == 0 ? 0 : input.withUnsafeMutableBytes {
                    file.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[0..<want]), at: range.lowerBound + offset)
                }
                // A file that ends early or cannot be read: the body cannot be completed.
                guard n == want else { return end(complete: false) }
                ok = input.withUnsafeBytes { encoder.encode(UnsafeRawBufferPointer(rebasing: $0[0..<n]), finish: false, emit: write) }
                offset += n
                if offset == range.count {
                    index += 1
                    offset = 0
                }
            }
            if !ok { return end(complete: false) }
        }
    }

    private func write(_ bytes: UnsafeRawBufferPointer) {
        sent += bytes.count
        stream.write(bytes)
    }

    private func end(complete: Bool) {
        guard stream.isOpen else { return }
        // Counted before the end is written, as every answer is.
        ended(sent, complete)
        if complete { stream.finish() } else { stream.abort() }
    }
}
