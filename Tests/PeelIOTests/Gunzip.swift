import CZlib

/// `data` gunzipped with zlib into at most `capacity` bytes; nil when it is not one whole gzip member.
func gunzip(_ data: [UInt8], capacity: Int) -> [UInt8]? {
    var stream = z_stream()
    guard inflateInit2_(&stream, 15 + 16, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return nil }
    defer { inflateEnd(&stream) }
    var out = [UInt8](repeating: 0, count: capacity)
    var input = data
    let rc = input.withUnsafeMutableBufferPointer { i in
        out.withUnsafeMutableBufferPointer { o in
            stream.next_in = i.baseAddress
            stream.avail_in = uInt(i.count)
            stream.next_out = o.baseAddress
            stream.avail_out = uInt(o.count)
            return inflate(&stream, Z_FINISH)
        }
    }
    return rc == Z_STREAM_END ? Array(out[0..<Int(stream.total_out)]) : nil
}
