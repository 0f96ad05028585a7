import Foundation

/// One thing wrong with a model, located as precisely as the model knows:
/// the file and line it was read from, the entity and the property.
///
/// ```swift
/// for problem in model.problems() where !problem.isWarning { print(problem) }
/// ```
public struct ModelProblem: CustomStringConvertible, Equatable, Sendable {
    public var message: String
    public var file: String?
    public var line: Int?
    public var entity: String?
    public var property: String?
    /// Warnings (such as a relationship with no inverse, REL-06) do not stop a
    /// model from being used.
    public var isWarning: Bool

    public init(_ message: String, file: String? = nil, line: Int? = nil, entity: String? = nil,
                property: String? = nil, isWarning: Bool = false) {
        self.message = message
        self.file = file
        self.line = line
        self.entity = entity
        self.property = property
        self.isWarning = isWarning
    }

    /// `file:line: error: entity 'E', property 'p': message`, the shape
    /// compilers use, so editors and terminals can jump to it.
    public var description: String {
        var out = ""
        if let file { out += file + ":" }
        if let line { out += "\(line):" }
        if !out.isEmpty { out += " " }
        out += isWarning ? "warning: " : "error: "
        var place: [String] = []
        if let entity { place.append("entity '\(entity)'") }
        if let property { place.append("property '\(property)'") }
        if !place.isEmpty { out += place.joined(separator: ", ") + ": " }
        return out + message
    }

    /// The problem as a Core Data error with its location in userInfo.
    public var error: CoreDataError {
        var info: [String: Any] = [:]
        if let file { info[CoreDataError.filePathErrorKey] = file }
        if let line { info[CoreDataError.lineNumberErrorKey] = line }
        if let entity { info[CoreDataError.entityNameErrorKey] = entity }
        if let property {
            info[CoreDataError.propertyNameErrorKey] = property
            info[CoreDataError.validationKeyErrorKey] = property
        }
        return CoreDataError(.coreData, description, userInfo: info)
    }
}
