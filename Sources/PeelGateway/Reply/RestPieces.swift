import PeelEnvelope
import PeelIO

extension FilePiece {
    /// A rest-of-object answer sent from the spool file its envelope is in: each run of kept members
    /// read from the file, Peel's braces and commas between them (the same bytes
    /// `RestOfObject.bytes(in:)` copies for a body in memory).
    static func pieces(of rest: RestOfObject) -> [FilePiece] {
        var out: [FilePiece] = [.bytes([UInt8(ascii: "{")])]
        out.reserveCapacity(rest.runs.count * 2 + 1)
        for (i, run) in rest.runs.enumerated() {
            if i > 0 { out.append(.bytes([UInt8(ascii: ",")])) }
            out.append(.file(run))
        }
        out.append(.bytes([UInt8(ascii: "}")]))
        return out
    }
}
