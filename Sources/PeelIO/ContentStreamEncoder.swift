import CBrotli
import CZlib

/// Compresses one answer in pieces, as they are read (a spooled answer sent from its file): the
/// output is one gzip member or one Brotli stream, whatever the pieces' sizes. Holds the library's
/// state until dropped; `stateBytes(for:)` is what a caller charges to its memory budget for it.
public final class ContentStreamEncoder {
    /// The coding it produces.
    public let coding: ContentCoding
    private var zlib: UnsafeMutablePointer<z_stream>?
    private var brotli: OpaquePointer?
    private var ended = false
    // Where each call's output is made before it is handed on.
    private let out: UnsafeMutablePointer<UInt8>
    private static let outSize = 65_536

    /// Brotli's window for a stream of unknown length (RFC 7932 §9.1): 1 MiB, not the default 4 MiB,
    /// since the ring buffer is allocated whole when the size is not known in advance.
    static let brotliWindow: UInt32 = 20

    /// Memory an encoder holds at most, output buffer included: zlib's window and hash chains at
    /// windowBits 15 and memLevel 8 (zlib.h: (1 << (15 + 2)) + (1 << (8 + 9)) bytes), or Brotli's
    /// ring buffer at `brotliWindow` and its hashers, which grow with the quality: measured peaks
    /// with 1.0.9 over 2 MiB streamed in 128 KiB pieces were 2.8 MiB at quality 3, 10.4 MiB at 4,
    /// 25 MiB at 8 and 40-44 MiB at 9 to 11.
    public static func stateBytes(for coding: ContentCoding, brotliQuality: Int32) -> Int {
        switch coding {
        case .gzip: return (1 << 17) + (1 << 17) + outSize + 65_536
        case .br:
            let mib = brotliQuality <= 3 ? 3 : brotliQuality == 4 ? 11 : brotliQuality <= 8 ? 26 : 45
            return mib << 20
        }
    }

    /// A new stream at zlib `gzipLevel` (1-9) or Brotli `brotliQuality` (0-11); nil when the library
    /// could not start one.
    public init?(coding: ContentCoding, gzipLevel: Int32, brotliQuality: Int32) {
        self.coding = coding
        // The library's state first: a failure returns before `out` exists, so no deinit runs.
        switch coding {
        case .gzip:
            guard let s = Self.deflateStream(level: gzipLevel) else { return nil }
            zlib = s
        case .br:
            guard let state = Self.brotliState(quality: brotliQuality) else { return nil }
            brotli = state
        }
        out = .allocate(capacity: Self.outSize)
    }

    private static func deflateStream(level: Int32) -> UnsafeMutablePointer<z_stream>? {
        let s = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        s.initialize(to: z_stream())
        guard ContentEncoder.startGzip(s, level: level) else {
            s.deinitialize(count: 1)
            s.deallocate()
            return nil
        }
        return s
    }

    private static func brotliState(quality: Int32) -> OpaquePointer? {
        guard let state = BrotliEncoderCreateInstance(nil, nil, nil) else { return nil }
        guard BrotliEncoderSetParameter(state, BROTLI_PARAM_QUALITY, UInt32(quality)) == BROTLI_TRUE,
              BrotliEncoderSetParameter(state, BROTLI_PARAM_LGWIN, brotliWindow) == BROTLI_TRUE,
              BrotliEncoderSetParameter(state, BROTLI_PARAM_MODE, UInt32(BROTLI_MODE_TEXT.rawValue)) == BROTLI_TRUE else {
            BrotliEncoderDestroyInstance(state)
            return nil
        }
        return state
    }

    deinit {
        if let zlib {
            // Z_DATA_ERROR only says the stream was not finished (a client that left): it is freed all the same.
            _ = deflateEnd(zlib)
            zlib.deinitialize(count: 1)
            zlib.deallocate()
        }
        if let brotli { BrotliEncoderDestroyInstance(brotli) }
        input?.deallocate()
        out.deallocate()
    }

    /// Bytes handed to streams by the `into:` calls.
    public private(set) var produced = 0
    /// Where a spool file's bytes are read before they are compressed (`stepSize`).
    private var input: UnsafeMutableRawPointer?
    /// Bytes of a file read and compressed per `encode(_:at:upTo:into:)`.
    public static let stepSize = 131_072

    /// Reads up to `count` (at most `stepSize`) bytes of `file` from `offset`, compresses them and
    /// writes the output to `stream`; how many were read, nil when the file ended early or could
    /// not be read, or the library failed.
    public func encode(_ file: SpooledBody, at offset: Int, upTo count: Int, into stream: ReplyStream) -> Int? {
        let want = min(count, Self.stepSize)
        guard want > 0 else { return 0 }
        let buffer = input ?? UnsafeMutableRawPointer.allocate(byteCount: Self.stepSize, alignment: 64)
        input = buffer
        let n = file.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: want), at: offset)
        guard n == want else { return nil }
        return encode(UnsafeRawBufferPointer(start: buffer, count: n), finish: false, emit: { write($0, to: stream) }) ? n : nil
    }

    /// Compresses `bytes` and writes the output to `stream`; false when the library failed.
    public func encode(_ bytes: [UInt8], into stream: ReplyStream) -> Bool {
        bytes.withUnsafeBytes { encode($0, finish: false, emit: { write($0, to: stream) }) }
    }

    /// Ends the compressed stream, its last output written to `stream`; false when the library failed.
    public func finish(into stream: ReplyStream) -> Bool {
        encode(UnsafeRawBufferPointer(start: nil, count: 0), finish: true, emit: { write($0, to: stream) })
    }

    private func write(_ bytes: UnsafeRawBufferPointer, to stream: ReplyStream) {
        produced += bytes.count
        stream.write(bytes)
    }

    /// Compresses `input`, then with `finish` ends the stream; `emit` is called with each piece of
    /// output (valid only during the call). False when the library failed or the stream had ended:
    /// the answer cannot be completed.
    public func encode(_ input: UnsafeRawBufferPointer, finish: Bool, emit: (UnsafeRawBufferPointer) -> Void) -> Bool {
        guard !ended else { return false }
        if finish { ended = true }
        if let zlib { return deflate(zlib, input, finish: finish, emit: emit) }
        if let brotli { return compress(brotli, input, finish: finish, emit: emit) }
        return false
    }

    private func deflate(_ s: UnsafeMutablePointer<z_stream>, _ input: UnsafeRawBufferPointer, finish: Bool,
                         emit: (UnsafeRawBufferPointer) -> Void) -> Bool {
        s.pointee.next_in = input.baseAddress.map { UnsafeMutablePointer(mutating: $0.assumingMemoryBound(to: Bytef.self)) }
        s.pointee.avail_in = uInt(input.count)
        defer { s.pointee.next_in = nil }
        while true {
            s.pointee.next_out = out
            s.pointee.avail_out = uInt(Self.outSize)
            let r = CZlib.deflate(s, finish ? Z_FINISH : Z_NO_FLUSH)
            // Z_BUF_ERROR only says no progress was possible (nothing in, nothing to flush): not fatal.
            guard r == Z_OK || r == Z_STREAM_END || r == Z_BUF_ERROR else { return false }
            let made = Self.outSize - Int(s.pointee.avail_out)
            if made > 0 { emit(UnsafeRawBufferPointer(start: out, count: made)) }
            if finish {
                if r == Z_STREAM_END { return true }
            } else if s.pointee.avail_in == 0 && s.pointee.avail_out != 0 {
                return true
            }
        }
    }

    private func compress(_ state: OpaquePointer, _ input: UnsafeRawBufferPointer, finish: Bool,
                          emit: (UnsafeRawBufferPointer) -> Void) -> Bool {
        var availIn = input.count
        var nextIn = input.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let op = finish ? BROTLI_OPERATION_FINISH : BROTLI_OPERATION_PROCESS
        while true {
            var availOut = Self.outSize
            var nextOut: UnsafeMutablePointer<UInt8>? = out
            guard BrotliEncoderCompressStream(state, op, &availIn, &nextIn, &availOut, &nextOut, nil) == BROTLI_TRUE else { return false }
            let made = Self.outSize - availOut
            if made > 0 { emit(UnsafeRawBufferPointer(start: out, count: made)) }
            if availIn == 0 && BrotliEncoderHasMoreOutput(state) == BROTLI_FALSE {
                if !finish || BrotliEncoderIsFinished(state) == BROTLI_TRUE { return true }
            }
        }
    }
}
