import Foundation

/// An attribute of an entity: a typed value with an optional default and
/// constraints checked at save (ATTR-*, AD-*).
///
/// Values use these Swift types: integer 16/32/64 → `Int16`/`Int32`/`Int64`,
/// decimal → `Decimal`, double → `Double`, float → `Float`, string → `String`,
/// boolean → `Bool`, date → `Date`, binary → `Data`, UUID → `UUID`, URI → `URL`,
/// transformable → any value its transformer accepts.
///
/// ```swift
/// let firstName = AttributeDescription(name: "firstName", type: .string)
/// firstName.isOptional = false
/// firstName.minLength = 2
/// let salary = AttributeDescription(name: "salary", type: .decimal)
/// salary.minValue = 0
/// salary.defaultValue = Decimal(0)
/// ```
public final class AttributeDescription: PropertyDescription {
    /// Part of the version hash (AD-13).
    @exclusivity(unchecked) public var attributeType: AttributeType { willSet { ensureEditable("attributeType") } }
    /// The value a new object starts with (ATTR-06); not part of the version hash.
    @exclusivity(unchecked) public var defaultValue: Any? { willSet { ensureEditable("defaultValue") } }
    /// For transformable attributes: the registered transformer's name (AD-10).
    /// Nil means the default keyed-archiver transformer (AD-12).
    @exclusivity(unchecked) public var valueTransformerName: String? { willSet { ensureEditable("valueTransformerName") } }
    /// For transformable attributes: the class name of the transformed value.
    @exclusivity(unchecked) public var customValueClassName: String? { willSet { ensureEditable("customValueClassName") } }
    /// Large binary values may live outside the store file.
    @exclusivity(unchecked) public var allowsExternalBinaryDataStorage = false { willSet { ensureEditable("allowsExternalBinaryDataStorage") } }
    /// Inclusive numeric bounds (ATTR-07); exact, so decimals compare without rounding.
    @exclusivity(unchecked) public var minValue: Decimal? { willSet { ensureEditable("minValue") } }
    @exclusivity(unchecked) public var maxValue: Decimal? { willSet { ensureEditable("maxValue") } }
    /// Inclusive length bounds for strings (characters) and binary data (bytes) (ATTR-08).
    @exclusivity(unchecked) public var minLength: Int? { willSet { ensureEditable("minLength") } }
    @exclusivity(unchecked) public var maxLength: Int? { willSet { ensureEditable("maxLength") } }
    /// Inclusive date bounds (CONST-VC-09, CONST-VC-10).
    @exclusivity(unchecked) public var minDate: Date? { willSet { ensureEditable("minDate") } }
    @exclusivity(unchecked) public var maxDate: Date? { willSet { ensureEditable("maxDate") } }
    /// A regular expression the whole string value must match (ATTR-09).
    @exclusivity(unchecked) public var regularExpression: String? { willSet { ensureEditable("regularExpression") } }
    /// Xcode's "use scalar type" code-generation flag; kept so files round-trip.
    @exclusivity(unchecked) public var usesScalarValueType: Bool? { willSet { ensureEditable("usesScalarValueType") } }

    /// A type name a model file used that no `AttributeType` has; reported
    /// by validation instead of the undefined type it falls back to.
    @exclusivity(unchecked) var unknownTypeName: String?

    public init(name: String, type: AttributeType = .undefined) {
        self.attributeType = type
        super.init(name: name)
    }

    /// The class Core Data would report for values of this attribute (AD-05).
    public var attributeValueClassName: String? {
        attributeType == .transformable ? customValueClassName : attributeType.valueClassName
    }

    public override func copy() -> PropertyDescription {
        let c = AttributeDescription(name: name, type: attributeType)
        copyCommonFields(to: c)
        c.defaultValue = defaultValue
        c.valueTransformerName = valueTransformerName
        c.customValueClassName = customValueClassName
        c.allowsExternalBinaryDataStorage = allowsExternalBinaryDataStorage
        c.minValue = minValue
        c.maxValue = maxValue
        c.minLength = minLength
        c.maxLength = maxLength
        c.minDate = minDate
        c.maxDate = maxDate
        c.regularExpression = regularExpression
        c.usesScalarValueType = usesScalarValueType
        c.unknownTypeName = unknownTypeName
        return c
    }

    override func differences(from other: PropertyDescription) -> [String] {
        var out = commonDifferences(from: other)
        guard let o = other as? AttributeDescription else { return out }
        func check<T: Equatable>(_ label: String, _ a: T, _ b: T) {
            if a != b { out.append("\(label): \(String(describing: a)) vs \(String(describing: b))") }
        }
        check("attributeType", attributeType, o.attributeType)
        if !ModelValue.equal(defaultValue, o.defaultValue) {
            out.append("defaultValue: \(String(describing: defaultValue)) vs \(String(describing: o.defaultValue))")
        }
        check("valueTransformerName", valueTransformerName, o.valueTransformerName)
        check("customValueClassName", customValueClassName, o.customValueClassName)
        check("allowsExternalBinaryDataStorage", allowsExternalBinaryDataStorage, o.allowsExternalBinaryDataStorage)
        check("minValue", minValue, o.minValue)
        check("maxValue", maxValue, o.maxValue)
        check("minLength", minLength, o.minLength)
        check("maxLength", maxLength, o.maxLength)
        check("minDate", minDate, o.minDate)
        check("maxDate", maxDate, o.maxDate)
        check("regularExpression", regularExpression, o.regularExpression)
        return out
    }
}
