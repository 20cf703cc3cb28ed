import PeelEnvelope

/// An OpenAPI document's text, JSON or YAML, read into one tree.
enum ContractDocument {
    /// JSON when the text starts with `{` (strict RFC 8259, unique member names), YAML otherwise.
    /// Why a document could not be read.
    struct Unreadable: Error, CustomStringConvertible {
        let description: String
    }

    static func parse(_ bytes: [UInt8]) -> Result<ConfigJSON, Unreadable> {
        let first = bytes.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }
        if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") || (bytes.starts(with: [0xEF, 0xBB, 0xBF]) && bytes.dropFirst(3).first == UInt8(ascii: "{")) {
            guard JSONScanner.validate(bytes) else {
            // Refused for its depth alone, the document should say so.
            let deep = JSONScanner.validate(bytes, maxDepth: Int.max)
            return .failure(Unreadable(description: deep ? "the document is nested deeper than 512 levels"
                                                          : "the document is not one JSON text (RFC 8259)"))
        }
            guard case .success(let doc) = ConfigJSON.parse(bytes) else {
                return .failure(Unreadable(description: "the document names a member twice in one object"))
            }
            return .success(doc)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(Unreadable(description: "the document is not UTF-8")) }
        do throws(YAMLReader.Failure) {
            return .success(try YAMLReader.read(text))
        } catch {
            return .failure(Unreadable(description: error.description))
        }
    }
}
