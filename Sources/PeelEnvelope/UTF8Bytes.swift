/// Runs body over a string's UTF-8 bytes, borrowing them when the string is contiguous (native
/// Swift strings are), copying otherwise; the scanner and matchers never iterate Characters.
@inline(__always)
func withUTF8Bytes<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
    if let result = text.utf8.withContiguousStorageIfAvailable(body) { return result }
    return Array(text.utf8).withUnsafeBufferPointer(body)
}
