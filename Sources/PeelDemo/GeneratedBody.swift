/// A valid envelope of an exact size, produced piece by piece: `{"code":0,"message":"ok","data":[{…},…]}`.
struct GeneratedBody {
    /// The body's size in bytes, known up front for Content-Length.
    let total: Int
    /// Bytes handed out so far.
    private(set) var produced = 0
    private var index = 0
    private var closed = false

    private static let prefix = Array(#"{"code":0,"message":"ok","data":["#.utf8)
    private static let suffix = Array("]}".utf8)
    private static let padding = String(repeating: "x", count: 64)

    /// The smallest body this generator can produce.
    static var minimumSize: Int { prefix.count + suffix.count }

    /// A generator for exactly `total` bytes (at least `minimumSize`).
    init(total: Int) {
        self.total = max(total, Self.minimumSize)
    }

    /// True once every byte has been handed out.
    var isDone: Bool { produced == total }

    /// The next piece of about `limit` bytes (one item may run past it); empty once done.
    mutating func nextPiece(limit: Int) -> [UInt8] {
        var piece: [UInt8] = []
        piece.reserveCapacity(limit + 256)
        if produced == 0 { piece += Self.prefix }
        while !closed && piece.count < limit {
            let room = total - Self.suffix.count - produced - piece.count
            let item = Array(((index == 0 ? "" : ",") + #"{"id":\#(index),"name":"item \#(index)","pad":"\#(Self.padding)"}"#).utf8)
            if item.count <= room {
                piece += item
                index += 1
            } else {
                // JSON allows whitespace before `]` (RFC 8259 §2), which makes the size exact.
                piece += [UInt8](repeating: 0x20, count: room)
                piece += Self.suffix
                closed = true
            }
        }
        produced += piece.count
        return piece
    }
}
