/// The hash that uniquing tables and change sets use for managed objects
/// and object IDs: one 64-bit mix (SplitMix64's finalizer) of a value that
/// already identifies the key (an object's address, a primary key).
///
/// Why not `Hasher`: every registration, change-set insert and row-cache
/// update hashes an object or an ID, and building a SipHash state for
/// eight bytes cost a tenth of an insert. The mix spreads addresses (16-byte
/// aligned) and sequential keys over every bucket, and the table's seed is
/// folded in, so tables still differ in their layout as Swift's do.
///
/// ```swift
/// public func _rawHashValue(seed: Int) -> Int { IdentityHash.mix(key, seed: seed) }
/// ```
enum IdentityHash {
    @inline(__always)
    static func mix(_ value: UInt64, seed: Int) -> Int {
        var x = value ^ UInt64(bitPattern: Int64(seed))
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        x ^= x >> 31
        return Int(truncatingIfNeeded: x)
    }

    /// The same mix without a seed, for folding a second word into a key.
    @inline(__always)
    static func mixBits(_ value: UInt64) -> UInt64 {
        UInt64(bitPattern: Int64(mix(value, seed: 0)))
    }
}
