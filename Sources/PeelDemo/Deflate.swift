/// Containers around uncompressed ("stored") deflate blocks: valid gzip and zlib without zlib.
enum Deflate {
    /// Stored blocks of at most 65535 bytes each (RFC 1951 §3.2.4); the last one has BFINAL set.
    static func stored(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + (bytes.count / 65_535 + 1) * 5)
        var offset = 0
        repeat {
            let count = min(65_535, bytes.count - offset)
            let final = offset + count == bytes.count
            // BFINAL is bit 0, BTYPE 00 in bits 1-2; the rest of the byte is padding to the boundary.
            out.append(final ? 1 : 0)
            appendLE16(UInt16(count), to: &out)
            appendLE16(~UInt16(count), to: &out)
            out.append(contentsOf: bytes[offset..<offset + count])
            offset += count
        } while offset < bytes.count
        return out
    }

    /// A gzip member (RFC 1952 §2.3): fixed header, stored deflate, CRC-32 and size.
    static func gzip(_ bytes: [UInt8]) -> [UInt8] {
        // ID1 ID2, CM=8 (deflate), FLG=0, MTIME=0, XFL=0, OS=255 (unknown).
        var out: [UInt8] = [0x1F, 0x8B, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0xFF]
        out += stored(bytes)
        appendLE32(Checksum.crc32(bytes), to: &out)
        appendLE32(UInt32(truncatingIfNeeded: bytes.count), to: &out)
        return out
    }

    /// A zlib stream (RFC 1950): CMF 0x78, FLG 0x01 (so CMF*256+FLG is a multiple of 31), Adler-32 big-endian.
    static func zlib(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        out += stored(bytes)
        appendBE32(Checksum.adler32(bytes), to: &out)
        return out
    }

    static func appendLE16(_ v: UInt16, to out: inout [UInt8]) {
        out.append(UInt8(v & 0xFF))
        out.append(UInt8(v >> 8))
    }

    static func appendLE32(_ v: UInt32, to out: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8((v >> UInt32(shift)) & 0xFF)) }
    }

    static func appendBE32(_ v: UInt32, to out: inout [UInt8]) {
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8((v >> UInt32(shift)) & 0xFF)) }
    }
}

/// A tiny valid PNG, for the passthrough endpoint.
enum DemoImage {
    /// A `width`×`height` RGB image of one colour (PNG spec §5, §11.2).
    static func png(width: Int = 2, height: Int = 2, rgb: (UInt8, UInt8, UInt8) = (0xF0, 0x7B, 0x3F)) -> [UInt8] {
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var ihdr: [UInt8] = []
        Deflate.appendBE32(UInt32(width), to: &ihdr)
        Deflate.appendBE32(UInt32(height), to: &ihdr)
        ihdr += [8, 2, 0, 0, 0]  // bit depth 8, colour type RGB, deflate, adaptive filter, no interlace
        var pixels: [UInt8] = []
        for _ in 0..<height {
            pixels.append(0)  // filter type None for this scanline
            for _ in 0..<width { pixels += [rgb.0, rgb.1, rgb.2] }
        }
        chunk("IHDR", ihdr, into: &out)
        chunk("IDAT", Deflate.zlib(pixels), into: &out)
        chunk("IEND", [], into: &out)
        return out
    }

    private static func chunk(_ type: String, _ data: [UInt8], into out: inout [UInt8]) {
        Deflate.appendBE32(UInt32(data.count), to: &out)
        let typed = Array(type.utf8) + data
        out += typed
        Deflate.appendBE32(Checksum.crc32(typed), to: &out)
    }
}
