import Foundation

/// True when `value` is an `NSNull` (Core Data's stand-in for nil inside
/// collections and dictionaries).
///
/// Written this way because on Linux a plain `value is NSNull` first bridges
/// a Swift value to an object: for an array of managed objects that is a copy
/// of the whole array into an `NSArray`, which made every to-many mutation
/// O(n). Only class instances can be `NSNull`, and asking the metatype first
/// costs nothing.
///
/// ```swift
/// isNSNull(NSNull())        // true
/// isNSNull([object, other]) // false, without bridging the array
/// ```
@inline(__always)
func isNSNull(_ value: Any) -> Bool {
    type(of: value) is AnyClass && value is NSNull
}

/// `value` with `NSNull` read as nil.
@inline(__always)
func nilIfNSNull(_ value: Any?) -> Any? {
    guard let value, !isNSNull(value) else { return nil }
    return value
}
