/// One piece of an answer sent from a spool file: a range of the file (sent with sendfile(2)), or
/// a few bytes of Peel's own between ranges (a rest-of-object answer's braces and commas).
public enum FilePiece: Sendable, Equatable {
    /// Bytes `range` of the file.
    case file(Range<Int>)
    /// These bytes, sent as they are.
    case bytes([UInt8])

    /// Bytes this piece adds to the answer.
    public var count: Int {
        switch self {
        case .file(let r): return r.count
        case .bytes(let b): return b.count
        }
    }

    /// The piece with its range cut to a file of `size` bytes.
    func clamped(to size: Int) -> FilePiece {
        guard case .file(let r) = self else { return self }
        return .file(r.clamped(to: 0..<size))
    }
}
