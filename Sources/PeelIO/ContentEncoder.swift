import CBrotli
import CZlib

/// A content coding Peel applies to answers (RFC 9110 §8.4.1); the raw value is its registered name.
public enum ContentCoding: String, Sendable, CaseIterable {
    /// gzip (RFC 1952), through zlib.
    case gzip
    /// Brotli (RFC 7932), through libbrotlienc.
    case br
}

/// Compresses whole answer bodies. One per worker, loop-thread only: its zlib stream is allocated
/// once and reset between answers (deflateInit allocates ~260 KiB each time otherwise).
public final class ContentEncoder {
    /// zlib level 1-9.
    public let gzipLevel: Int32
    /// Brotli quality 0-11.
    public let brotliQuality: Int32
    // zlib keeps a pointer back to the stream it was initialised with (deflateStateCheck), so the
    // stream lives at one address for the encoder's lifetime.
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private var streamReady = false

    /// Creates an encoder with the given levels.
    public init(gzipLevel: Int, brotliQuality: Int) {
        self.gzipLevel = Int32(gzipLevel)
        self.brotliQuality = Int32(brotliQuality)
        stream.initialize(to: z_stream())
    }

    deinit {
        if streamReady { deflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// `bytes` encoded as `coding`; nil when the library failed or the input is too large for it
    /// (the answer then goes unencoded).
    public func encode(_ bytes: UnsafeRawBufferPointer, as coding: ContentCoding) -> [UInt8]? {
        guard let input = bytes.baseAddress, bytes.count > 0, bytes.count <= Int(UInt32.max) else { return nil }
        switch coding {
        case .gzip: return gzip(input, bytes.count)
        case .br: return brotli(input, bytes.count)
        }
    }

    private func gzip(_ input: UnsafeRawPointer, _ count: Int) -> [UInt8]? {
        if streamReady {
            guard deflateReset(stream) == Z_OK else { return nil }
        } else {
            guard Self.startGzip(stream, level: gzipLevel) else { return nil }
            streamReady = true
        }
        let bound = Int(deflateBound(stream, uLong(count)))
        var ok = false
        let out = [UInt8](unsafeUninitializedCapacity: bound) { buffer, initialized in
            stream.pointee.next_in = UnsafeMutablePointer(mutating: input.assumingMemoryBound(to: Bytef.self))
            stream.pointee.avail_in = uInt(count)
            stream.pointee.next_out = buffer.baseAddress
            stream.pointee.avail_out = uInt(bound)
            // deflateBound's size always holds the whole stream, so one Z_FINISH call ends it.
            ok = deflate(stream, Z_FINISH) == Z_STREAM_END
            initialized = ok ? bound - Int(stream.pointee.avail_out) : 0
            stream.pointee.next_in = nil
            stream.pointee.next_out = nil
        }
        return ok ? out : nil
    }

    /// Starts `stream` as a gzip encoder at `level`: windowBits 15 + 16 asks for a gzip wrapper
    /// instead of zlib's, memLevel 8 (zlib.h, deflateInit2; `ContentStreamEncoder.stateBytes` counts
    /// on both).
    static func startGzip(_ stream: UnsafeMutablePointer<z_stream>, level: Int32) -> Bool {
        deflateInit2_(stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, zlibVersion(),
                      Int32(MemoryLayout<z_stream>.size)) == Z_OK
    }

    private func brotli(_ input: UnsafeRawPointer, _ count: Int) -> [UInt8]? {
        let bound = BrotliEncoderMaxCompressedSize(count)
        guard bound > 0 else { return nil }
        var ok = false
        let out = [UInt8](unsafeUninitializedCapacity: bound) { buffer, initialized in
            var size = bound
            ok = BrotliEncoderCompress(brotliQuality, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_TEXT, count,
                                       input.assumingMemoryBound(to: UInt8.self), &size, buffer.baseAddress) == BROTLI_TRUE
            initialized = ok ? size : 0
        }
        return ok ? out : nil
    }
}
