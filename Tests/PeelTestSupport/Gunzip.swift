import CZlib

/// `bytes` gunzipped with zlib, an independent decoder (Peel's gzip writers are zlib's deflate and
/// the demo's own); nil when they are not one whole gzip member. Not the system gzip through
/// Foundation's Process: AddressSanitizer caught Process.run reading past a buffer while listing
/// the process's descriptors.
public func gunzip(_ bytes: [UInt8]) -> [UInt8]? {
    var stream = z_stream()
    // windowBits 15 + 16: a gzip wrapper (zlib.h, inflateInit2).
    guard inflateInit2_(&stream, 15 + 16, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
    defer { inflateEnd(&stream) }
    var input = bytes
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65_536)
    let ended = input.withUnsafeMutableBufferPointer { inBuf -> Bool in
        stream.next_in = inBuf.baseAddress
        stream.avail_in = UInt32(inBuf.count)
        while true {
            let rc = chunk.withUnsafeMutableBufferPointer { c -> Int32 in
                stream.next_out = c.baseAddress
                stream.avail_out = UInt32(c.count)
                return inflate(&stream, Z_NO_FLUSH)
            }
            out += chunk[0..<(chunk.count - Int(stream.avail_out))]
            if rc == Z_STREAM_END { return true }
            // Z_BUF_ERROR with no input left: the member is cut short.
            guard rc == Z_OK else { return false }
        }
    }
    return ended ? out : nil
}
