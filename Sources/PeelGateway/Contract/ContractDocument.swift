import PeelEnvelope

/// An OpenAPI document's text, JSON or YAML, read into one tree.
enum ContractDocument {
    /// Why a document could not be read.
    struct Unreadable: Error, CustomStringConvertible {
        let description: String
    }

    /// JSON when the text starts with `{` (strict RFC 8259, unique member names), YAML otherwise.
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
        guard String(validating: bytes, as: UTF8.self) != nil else { return .failure(Unreadable(description: "the document is not UTF-8")) }
        do throws(YAMLReader.Failure) {
            // A byte order mark may open a YAML stream (YAML 1.2 §5.2); it is no part of the first key.
            return .success(try YAMLReader.read(bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes))
        } catch {
            return .failure(Unreadable(description: error.description))
        }
    }
}
