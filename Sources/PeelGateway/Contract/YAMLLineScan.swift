/// Where each line's content ends: a comment starts at a `#` after a blank, but not inside a quoted
/// scalar, and a quoted scalar or a flow collection may go on over several lines (PyYAML wraps long
/// strings so), so what one line leaves open is carried to the next. Quotes and flow collections
/// open only where a node starts: PyYAML reads `rock 'n roll # a comment` as "rock 'n roll".
enum YAMLLineScan {
    /// What a line leaves open for the lines after it.
    struct State {
        /// The quote of a quoted scalar that goes on, or 0.
        var quote: UInt8 = 0
        /// Flow collections open.
        var flow = 0
        /// When the last line ended in a plain scalar: the column of its key or `-`. A deeper line
        /// goes on with it, so a quote at its start is text (PyYAML wraps long plain scalars so).
        var plainOwner: Int?
        /// Whether the next line goes on with a quoted scalar or flow collection of this one.
        var open: Bool { quote != 0 || flow > 0 }
    }

    /// What one line holds.
    struct Scanned {
        /// Where its comment starts (or the line's end).
        let content: Int
        /// When the line ends in a block scalar's header (`key: |`): the column of the key or `-`
        /// that the scalar belongs to, whose deeper lines are the scalar's text.
        let blockOwner: Int?
    }

    /// Scans `bytes[start..<end]`, a line without its line break, from `state`, leaving in it what
    /// the line leaves open.
    static func scan(_ bytes: [UInt8], _ start: Int, _ end: Int, _ state: inout State) -> Scanned {
        var k = start
        while k < end && bytes[k] == YAMLByte.space { k += 1 }
        let indent = k - start
        // Where a node may start: a quote or a flow collection opens there.
        var atNodeStart = true
        var afterBlank = true
        // Whether the line's last node is a plain scalar, and the column of the line's last `-` or
        // key, which that scalar belongs to.
        var plain = false
        var owner: Int?
        var nodeStart = k
        var header: Int?
        var content = false
        if state.quote != 0 {
            guard let closed = quoteEnd(bytes, state.quote, start, end) else { return Scanned(content: end, blockOwner: nil) }
            state.quote = 0
            k = closed
            atNodeStart = false
            afterBlank = false
            content = true
        } else if state.flow == 0, let p = state.plainOwner, indent > p {
            atNodeStart = false
            plain = true
            owner = p
        }
        while k < end {
            let c = bytes[k]
            if c == YAMLByte.space || c == YAMLByte.tab {
                afterBlank = true
                k += 1
                continue
            }
            if c == YAMLByte.hash && afterBlank { break }
            afterBlank = false
            content = true
            if atNodeStart {
                nodeStart = k
                plain = false
                if c == YAMLByte.quote || c == YAMLByte.apostrophe {
                    guard let closed = quoteEnd(bytes, c, k + 1, end) else {
                        state.quote = c
                        return Scanned(content: end, blockOwner: nil)
                    }
                    k = closed
                    atNodeStart = false
                    continue
                }
                if c == YAMLByte.bracket || c == YAMLByte.brace {
                    state.flow += 1
                    k += 1
                    continue
                }
                if state.flow == 0 && c == YAMLByte.dash && (k + 1 == end || bytes[k + 1] == YAMLByte.space || bytes[k + 1] == YAMLByte.tab) {
                    owner = k - start
                    k += 1
                    continue
                }
                if state.flow == 0 && (c == YAMLByte.pipe || c == YAMLByte.greater), let owner {
                    header = owner
                } else if state.flow == 0 {
                    plain = true
                }
                atNodeStart = false
            }
            if state.flow > 0 {
                if c == YAMLByte.comma {
                    atNodeStart = true
                } else if c == YAMLByte.closeBracket || c == YAMLByte.closeBrace {
                    state.flow -= 1
                } else if c == YAMLByte.colon {
                    // `{"a":'b'}`: in a flow mapping a value may follow its key's colon at once.
                    atNodeStart = true
                }
            } else if c == YAMLByte.colon && (k + 1 == end || bytes[k + 1] == YAMLByte.space || bytes[k + 1] == YAMLByte.tab) {
                owner = nodeStart - start
                atNodeStart = true
                plain = false
            }
            k += 1
        }
        if content && !state.open {
            // A plain scalar alone on its line (under `key:`) belongs to the node above it.
            state.plainOwner = plain ? (owner ?? indent - 1) : nil
        }
        return Scanned(content: k, blockOwner: state.open ? nil : header)
    }

    /// Just past the quote that closes the one at `start`, or nil when none does on the line.
    static func closingQuote(_ bytes: [UInt8], _ start: Int, _ end: Int) -> Int? {
        quoteEnd(bytes, bytes[start], start + 1, end)
    }

    /// Just past the quote `q` that closes a scalar read from `from`: `''` inside single quotes and
    /// a backslash's escape inside double quotes do not close it. Nil when none does before `end`.
    static func quoteEnd(_ bytes: [UInt8], _ q: UInt8, _ from: Int, _ end: Int) -> Int? {
        var k = from
        while k < end {
            let c = bytes[k]
            if q == YAMLByte.quote && c == YAMLByte.backslash {
                k += 2
                continue
            }
            if c == q {
                if q == YAMLByte.apostrophe && k + 1 < end && bytes[k + 1] == YAMLByte.apostrophe {
                    k += 2
                    continue
                }
                return k + 1
            }
            k += 1
        }
        return nil
    }
}
