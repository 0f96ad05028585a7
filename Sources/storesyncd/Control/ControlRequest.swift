import Foundation
import StoreSyncControl

/// One request line, checked: a JSON object with a version this daemon
/// speaks and a known op. Fields are read through accessors that name the
/// field in their error, so a client learns exactly what was wrong.
struct ControlRequest {
    /// Echoed in the reply: any JSON value the client chose (null if none).
    var id: JSONValue
    var op: ControlProtocol.Op
    var fields: [String: JSONValue]

    /// A line that is not a request this daemon answers: the error to send,
    /// with the line's `id` when it could be read.
    struct Refusal: Error {
        var id: JSONValue
        var error: ControlError
    }

    /// Parses a line.
    static func parse(_ line: Data) -> Result<ControlRequest, Refusal> {
        let value: JSONValue
        do { value = try JSONValue.parse(line) } catch {
            return .failure(Refusal(id: .null, error: ControlError(.badJSON, "the request is not JSON: \(Self.reason(error))")))
        }
        guard let fields = value.object else {
            return .failure(Refusal(id: .null, error: ControlError(.badJSON, "the request must be a JSON object, found \(value.typeName)")))
        }
        let id = fields["id"] ?? .null
        guard let versionValue = fields["v"] else {
            return .failure(Refusal(id: id, error: ControlError(.badRequest, "missing field v (the protocol version; this daemon speaks \(Self.versions))")))
        }
        guard let version = versionValue.int else {
            return .failure(Refusal(id: id, error: ControlError(.badRequest, "field v: expected an integer, found \(versionValue.typeName)")))
        }
        guard ControlProtocol.supportedVersions.contains(version) else {
            return .failure(Refusal(id: id, error: ControlError(.unsupportedVersion, "protocol version \(version) is not supported; this daemon speaks \(Self.versions)")))
        }
        guard let opValue = fields["op"] else { return .failure(Refusal(id: id, error: ControlError(.badRequest, "missing field op"))) }
        guard let opName = opValue.string else {
            return .failure(Refusal(id: id, error: ControlError(.badRequest, "field op: expected a string, found \(opValue.typeName)")))
        }
        guard let op = ControlProtocol.Op(rawValue: opName) else {
            let known = ControlProtocol.Op.allCases.map(\.rawValue).joined(separator: ", ")
            return .failure(Refusal(id: id, error: ControlError(.unknownOp, "unknown op '\(opName)' (this daemon knows \(known))")))
        }
        return .success(ControlRequest(id: id, op: op, fields: fields))
    }

    private static var versions: String { ControlProtocol.supportedVersions.map(String.init).joined(separator: ", ") }

    /// JSONDecoder's errors carry the useful part in their context.
    private static func reason(_ error: Error) -> String {
        if case DecodingError.dataCorrupted(let context) = error {
            let underlying = (context.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return underlying ?? context.debugDescription
        }
        return "\(error)"
    }

    // MARK: - Fields

    /// An optional string field; present but not a string is an error.
    func string(_ name: String) throws -> String? {
        guard let value = fields[name], !value.isNull else { return nil }
        guard let string = value.string else { throw ControlError(.badRequest, "field \(name): expected a string, found \(value.typeName)") }
        guard !string.isEmpty else { throw ControlError(.badRequest, "field \(name): must not be empty") }
        return string
    }

    func requiredString(_ name: String) throws -> String {
        guard let string = try string(name) else { throw ControlError(.badRequest, "missing field \(name) (op \(op.rawValue))") }
        return string
    }

    func bool(_ name: String, default defaultValue: Bool) throws -> Bool {
        guard let value = fields[name], !value.isNull else { return defaultValue }
        guard let bool = value.bool else { throw ControlError(.badRequest, "field \(name): expected true or false, found \(value.typeName)") }
        return bool
    }

    func requiredInt(_ name: String) throws -> Int64 {
        guard let value = fields[name], !value.isNull else { throw ControlError(.badRequest, "missing field \(name) (op \(op.rawValue))") }
        guard let int = value.int else { throw ControlError(.badRequest, "field \(name): expected an integer, found \(value.typeName)") }
        return int
    }
}

/// Reply lines: every one carries `"v"`, the request's `"id"` and `"ok"`.
enum ControlReply {
    static func ok(_ id: JSONValue, _ fields: [String: JSONValue] = [:]) -> JSONValue {
        var object = fields
        object["v"] = .int(ControlProtocol.version)
        object["id"] = id
        object["ok"] = true
        return .object(object)
    }

    static func error(_ id: JSONValue, _ error: ControlError, _ extra: [String: JSONValue] = [:]) -> JSONValue {
        var object = extra
        object["v"] = .int(ControlProtocol.version)
        object["id"] = id
        object["ok"] = false
        object["error"] = error.json
        return .object(object)
    }

    /// A stream item of subscription `id`: `"event"` instead of `"ok"`.
    static func event(_ id: JSONValue, _ name: String, _ fields: [String: JSONValue]) -> JSONValue {
        var object = fields
        object["v"] = .int(ControlProtocol.version)
        object["id"] = id
        object["event"] = .string(name)
        return .object(object)
    }
}
