import CZlib
import Foundation

/// Raw deflate (RFC 1951: no zlib or gzip header, no checksum), the
/// compression Core Data applies to the model it caches in a SQLite store's
/// `Z_MODELCACHE.Z_CONTENT`. Apple writes it with its Compression framework's
/// `COMPRESSION_ZLIB`, which is exactly this; zlib reads and writes it with
/// a negative window size.
///
/// ```swift
/// let packed = try RawDeflate.compress(Data("hello".utf8))
/// let plain = try RawDeflate.decompress(packed, limit: 1 << 20)   // "hello"
/// ```
public enum RawDeflate {
    /// What a failure was, for the caller to put in its own error.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Inflates `data`. Fails on corrupt or truncated input, on bytes after
    /// the end of the stream, and when the output would pass `limit` bytes
    /// (a few kilobytes of deflate can claim gigabytes).
    public static func decompress(_ data: Data, limit: Int = 256 << 20) throws -> Data {
        var stream = z_stream()
        // -15: raw deflate with a 32 KiB window.
        guard inflateInit2_(&stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw Failure(description: "zlib could not start inflating")
        }
        defer { inflateEnd(&stream) }
        var output = Data()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let input = [UInt8](data)
        return try input.withUnsafeBufferPointer { inputBuffer -> Data in
            stream.next_in = UnsafeMutablePointer(mutating: inputBuffer.baseAddress)
            stream.avail_in = uInt(inputBuffer.count)
            while true {
                let (status, produced) = chunk.withUnsafeMutableBufferPointer { out -> (Int32, Int) in
                    stream.next_out = out.baseAddress
                    stream.avail_out = uInt(out.count)
                    let status = inflate(&stream, Z_NO_FLUSH)
                    return (status, out.count - Int(stream.avail_out))
                }
                output.append(contentsOf: chunk[0..<produced])
                if output.count > limit {
                    throw Failure(description: "inflated data passes \(limit) bytes")
                }
                switch status {
                case Z_STREAM_END:
                    if stream.avail_in != 0 {
                        throw Failure(description: "\(stream.avail_in) bytes follow the end of the deflate stream")
                    }
                    return output
                case Z_OK:
                    continue
                case Z_BUF_ERROR:
                    // No progress possible: the input ended before the stream did.
                    throw Failure(description: "deflate stream is truncated (input ended after \(inputBuffer.count) bytes)")
                default:
                    let reason = stream.msg.map { String(cString: $0) } ?? "status \(status)"
                    throw Failure(description: "deflate stream is corrupt: \(reason)")
                }
            }
        }
    }

    /// Deflates `data` at zlib's default level, raw (no header), as Core
    /// Data writes `Z_CONTENT`.
    public static func compress(_ data: Data) throws -> Data {
        var stream = z_stream()
        guard deflateInit2_(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY,
                            ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw Failure(description: "zlib could not start deflating")
        }
        defer { deflateEnd(&stream) }
        let input = [UInt8](data)
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))) + 16)
        let written = try input.withUnsafeBufferPointer { inputBuffer -> Int in
            try output.withUnsafeMutableBufferPointer { out -> Int in
                stream.next_in = UnsafeMutablePointer(mutating: inputBuffer.baseAddress)
                stream.avail_in = uInt(inputBuffer.count)
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(out.count)
                guard deflate(&stream, Z_FINISH) == Z_STREAM_END else {
                    throw Failure(description: "zlib could not finish deflating")
                }
                return out.count - Int(stream.avail_out)
            }
        }
        return Data(output[0..<written])
    }
}
