import Foundation
import Testing
@testable import ObjectGraph

/// Attribute values ↔ SQLite column values, per type, through a real column
/// of the SQL type Core Data declares.
@Suite struct SQLiteValueCodecTests {
    static let cases: [(AttributeType, Any)] = [
        (.integer16, Int16(-32768)),
        (.integer32, Int32(2_000_000_000)),
        (.integer64, Int64.min),
        (.boolean, true),
        (.boolean, false),
        (.decimal, Decimal(string: "12345.6789", locale: Locale(identifier: "en_US_POSIX"))!),
        (.decimal, Decimal(string: "0.1", locale: Locale(identifier: "en_US_POSIX"))!),
        (.double, 3.141592653589793),
        (.float, Float(10.6)),
        (.string, "Grüße, 世界"),
        (.date, Date(timeIntervalSinceReferenceDate: 544126946.054655)),
        (.binaryData, Data([0, 1, 2, 3, 254, 255])),
        (.uuid, UUID(uuidString: "AD2A8919-0895-43EB-B50C-488928D3650C")!),
        (.uri, URL(string: "x-coredata://AD2A8919/Bot/p2")!),
    ]

    private func roundTrip(_ attribute: AttributeDescription, _ value: Any?) throws -> (SQLiteValue, Any?) {
        let db = try SQLiteConnection(path: try TestPaths.temporaryDirectory().appendingPathComponent("c.sqlite").path, mode: .readWriteCreate)
        let type = try #require(SQLiteSchema.sqlType(for: attribute.attributeType))
        try db.execute("CREATE TABLE t (v \(type))")
        try db.run("INSERT INTO t VALUES (?)", [try SQLiteValueCodec.encode(value, for: attribute)])
        let stored = try #require(try db.query("SELECT v FROM t").first?.first)
        return (stored, try SQLiteValueCodec.decode(stored, for: attribute))
    }

    @Test(arguments: 0..<cases.count)
    func valuesRoundTripThroughTheirColumnType(index: Int) throws {
        let (type, value) = Self.cases[index]
        let attribute = AttributeDescription(name: "v", type: type)
        let (_, back) = try roundTrip(attribute, value)
        #expect(ModelValue.equal(back, value), "\(type): \(value) came back as \(String(describing: back))")
    }

    @Test func storageMatchesCoreData() throws {
        let date = AttributeDescription(name: "d", type: .date)
        #expect(try roundTrip(date, Date(timeIntervalSinceReferenceDate: 60.5)).0 == .real(60.5))
        // TIMESTAMP has NUMERIC affinity: a whole number of seconds is kept as an INTEGER.
        #expect(try roundTrip(date, Date(timeIntervalSinceReferenceDate: 60)).0 == .integer(60))
        #expect(try roundTrip(date, Date(timeIntervalSinceReferenceDate: 60)).1 as? Date == Date(timeIntervalSinceReferenceDate: 60))
        let flag = AttributeDescription(name: "b", type: .boolean)
        #expect(try roundTrip(flag, true).0 == .integer(1))
        let uuid = AttributeDescription(name: "u", type: .uuid)
        let u = UUID()
        guard case .blob(let bytes) = try roundTrip(uuid, u).0 else { Issue.record("UUID not a blob"); return }
        #expect(bytes.count == 16)
        #expect(bytes == withUnsafeBytes(of: u.uuid) { Data($0) })
        let uri = AttributeDescription(name: "r", type: .uri)
        #expect(try roundTrip(uri, URL(string: "https://example.com/a?b=c")!).0 == .text("https://example.com/a?b=c"))
        let decimal = AttributeDescription(name: "m", type: .decimal)
        #expect(try roundTrip(decimal, Decimal(5)).0 == .integer(5), "NUMERIC affinity stores an exact integer")
    }

    /// DECIMAL has NUMERIC affinity, so a decimal becomes a REAL when it
    /// looks like one: beyond double precision digits are lost, as with
    /// Apple's SQLite store.
    @Test func longDecimalsKeepDoublePrecision() throws {
        let decimal = AttributeDescription(name: "m", type: .decimal)
        let long = Decimal(string: "12345.678901234567890123", locale: Locale(identifier: "en_US_POSIX"))!
        let (stored, back) = try roundTrip(decimal, long)
        #expect(stored.doubleValue == 12345.678901234567)
        let value = try #require(back as? Decimal)
        #expect(abs(NSDecimalNumber(decimal: value - long).doubleValue) < 1e-9)
    }

    @Test func nilIsNull() throws {
        for type in [AttributeType.string, .integer32, .date, .binaryData, .uuid] {
            let attribute = AttributeDescription(name: "v", type: type)
            let (stored, back) = try roundTrip(attribute, nil)
            #expect(stored == .null)
            #expect(back == nil)
        }
    }

    @Test func transformableUsesTheRegistry() throws {
        let attribute = AttributeDescription(name: "v", type: .transformable)
        attribute.valueTransformerName = ValueTransformerRegistry.propertyListName
        let value: [String: Any] = ["a": 1, "b": ["x", "y"]]
        let (stored, back) = try roundTrip(attribute, value)
        #expect(stored.dataValue != nil)
        let dict = try #require(back as? [String: Any])
        #expect(dict["b"] as? [String] == ["x", "y"])
    }

    @Test func wrongTypeIsASaveError() throws {
        let attribute = AttributeDescription(name: "v", type: .date)
        do {
            _ = try SQLiteValueCodec.encode("yesterday", for: attribute)
            Issue.record("expected an error")
        } catch { #expect(error.coreDataCode == 134030) }
    }

    /// Values Apple wrote: ZBOT.ZLASTUPDATE is a REAL of seconds since 2001.
    @Test func decodesApplesDates() throws {
        let date = AttributeDescription(name: "lastUpdate", type: .date)
        let decoded = try SQLiteValueCodec.decode(.real(544126946.054655), for: date) as? Date
        #expect(decoded == Date(timeIntervalSinceReferenceDate: 544126946.054655))
        #expect(decoded.map { ISO8601DateFormatter().string(from: $0) } == "2018-03-30T18:22:26Z")
    }
}
