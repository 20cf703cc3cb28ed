/// Strict RFC 8259 validation in one pass over the bytes, without building a tree.
public enum JSONScanner {
    /// Whether the whole of `bytes` is one JSON text (RFC 8259 §2) nested at most `maxDepth` levels.
    public static func validate(_ bytes: [UInt8], maxDepth: Int = 512) -> Bool {
        bytes.withUnsafeBufferPointer { validate($0, maxDepth: maxDepth) }
    }

    /// Whether the whole buffer is one JSON text nested at most `maxDepth` levels.
    public static func validate(_ bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int = 512) -> Bool {
        var members = EnvelopeMembers()
        return ScanCore.run(bytes, maxDepth: maxDepth, names: nil, members: &members)
    }
}
