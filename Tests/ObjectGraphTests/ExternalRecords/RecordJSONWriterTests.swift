import Foundation
import Testing
@testable import ObjectGraph

/// The records' own JSON writer gives what JSONSerialization reads back,
/// escapes included, with keys sorted.
@Suite struct RecordJSONWriterTests {
    @Test func itsOutputParsesToTheSameValues() throws {
        let tricky = "quote \" backslash \\ slash / newline \n tab \t bell \u{7} nul \u{0} é 日本 🎉"
        let record: [String: Any] = [
            "b": tricky, "a": 1, "c": -2.5, "d": true, "e": NSNull(), "f": ["x", "y\"z"], "g": [String](),
            "h": ["nested": ["deep": "value"] as [String: Any], "empty": [String: Any]()] as [String: Any], "i": 1e300, "j": Int.min,
        ]
        let data = try #require(RecordJSONWriter.data(of: record))
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.hasSuffix("}\n"))
        #expect(text.contains(#""f" : ["#) && text.contains("/ newline"))   // slashes are not escaped
        let back = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(back["b"] as? String == tricky)
        #expect((back["a"] as? NSNumber)?.intValue == 1 && (back["c"] as? NSNumber)?.doubleValue == -2.5)
        #expect(back["d"] as? Bool == true && back["e"] is NSNull)
        #expect(back["f"] as? [String] == ["x", "y\"z"] && back["g"] as? [String] == [])
        #expect(((back["h"] as? [String: Any])?["nested"] as? [String: Any])?["deep"] as? String == "value")
        #expect((back["i"] as? NSNumber)?.doubleValue == 1e300 && (back["j"] as? NSNumber)?.int64Value == Int64.min)
        // Keys in order.
        let keys = text.split(separator: "\n").filter { $0.hasPrefix("  \"") }.map { $0.dropFirst(3).prefix(1) }
        #expect(keys == ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"])
        // A value of another type is left to JSONSerialization.
        #expect(RecordJSONWriter.data(of: ["date": Date()]) == nil)
        #expect(RecordJSONWriter.data(of: ["nan": Double.nan]) == nil)
    }
}
