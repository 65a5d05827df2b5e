// Substring search without _StringProcessing. The standard library's
// `contains(_: some StringProtocol)`, `ranges(of:)` and `split(separator:)` with
// a string separator live in _StringProcessing (with the regex engine: 1 MB of
// the binary); attled's targets build with its implicit import turned off
// (Package.swift), so text search goes through these.

extension StringProtocol {
    /// The first range of `needle` in this text, compared byte by byte in UTF-8
    /// (no Unicode canonical equivalence: attled searches ASCII words and markers).
    public func firstRange(ofText needle: some StringProtocol) -> Range<Index>? {
        let hay = Array(utf8), pat = Array(needle.utf8)
        guard !pat.isEmpty else { return startIndex..<startIndex }
        guard pat.count <= hay.count else { return nil }
        for start in 0...(hay.count - pat.count) where hay[start] == pat[0] {
            var i = 1
            while i < pat.count, hay[start + i] == pat[i] { i += 1 }
            if i == pat.count {
                let lower = utf8.index(utf8.startIndex, offsetBy: start)
                let upper = utf8.index(lower, offsetBy: pat.count)
                return lower..<upper
            }
        }
        return nil
    }

    /// Whether `needle` occurs in this text (byte-wise, as `firstRange(ofText:)`).
    public func includes(_ needle: some StringProtocol) -> Bool {
        firstRange(ofText: needle) != nil
    }
}
