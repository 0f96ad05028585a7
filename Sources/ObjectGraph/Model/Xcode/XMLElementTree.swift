import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// A small element tree read with Foundation's `XMLParser` (libxml2), keeping
/// each element's line so model errors can point into the file.
struct XMLElementNode {
    var name: String
    var attributes: [String: String]
    var children: [XMLElementNode] = []
    var line: Int
    /// The element's own text (character data outside its children).
    var text: String = ""

    func children(named name: String) -> [XMLElementNode] { children.filter { $0.name == name } }
    func child(named name: String) -> XMLElementNode? { children.first { $0.name == name } }

    /// Parses a whole document; a malformed one throws Core Data's corrupt-file
    /// error (259) with the file, line and column of the fault.
    static func parse(_ data: Data, file: String?) throws -> XMLElementNode {
        let builder = TreeBuilder()
        let parser = XMLParser(data: data)
        parser.delegate = builder
        parser.shouldProcessNamespaces = false
        let ok = parser.parse()
        if !ok || builder.root == nil {
            let reason = parser.parserError.map { ($0 as NSError).localizedDescription } ?? "no root element"
            let line = builder.errorLine ?? parser.lineNumber
            let column = builder.errorColumn ?? parser.columnNumber
            var info: [String: Any] = [CoreDataError.lineNumberErrorKey: line]
            if let file { info[CoreDataError.filePathErrorKey] = file }
            throw CoreDataError(.fileReadCorruptFile,
                                "\(file ?? "<data>"):\(line):\(column): error: malformed XML: \(reason)",
                                userInfo: info)
        }
        return builder.root!
    }
}

private final class TreeBuilder: NSObject, XMLParserDelegate {
    var stack: [XMLElementNode] = []
    var root: XMLElementNode?
    var errorLine: Int?
    var errorColumn: Int?

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
                qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]) {
        stack.append(XMLElementNode(name: elementName, attributes: attributeDict, line: parser.lineNumber))
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
        guard let done = stack.popLast() else { return }
        if stack.isEmpty { root = done } else { stack[stack.count - 1].children.append(done) }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard !stack.isEmpty else { return }
        stack[stack.count - 1].text += string
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: Error) {
        if errorLine == nil {
            errorLine = parser.lineNumber
            errorColumn = parser.columnNumber
        }
    }
}
