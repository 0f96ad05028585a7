import Foundation

/// Undo and redo for a context (MOC-UN-*); Foundation's `UndoManager` does
/// not exist on Linux. A context registers one group per
/// `processPendingChanges` (MOC-UN-07); explicit `beginUndoGrouping()` /
/// `endUndoGrouping()` pairs gather several into one step.
///
/// ```swift
/// context.undoManager = ContextUndoManager()
/// employee.lastName = "Smith"
/// context.processPendingChanges()
/// context.undo()              // lastName is back
/// ```
public final class ContextUndoManager {
    typealias Action = () -> Void
    struct Group { var actions: [Action] = []; var name: String? }

    private var undoStack: [Group] = []
    private var redoStack: [Group] = []
    private var openGroups: [Group] = []
    private var collecting: Group?
    private var disabledCount = 0

    /// The most undo steps kept; 0 means unlimited.
    public var levelsOfUndo = 0 { didSet { trim() } }
    public private(set) var isUndoing = false
    public private(set) var isRedoing = false

    public init() {}

    public var canUndo: Bool { !undoStack.isEmpty }
    public var canRedo: Bool { !redoStack.isEmpty }
    /// The nesting depth of explicit groups.
    public var groupingLevel: Int { openGroups.count }
    public var isUndoRegistrationEnabled: Bool { disabledCount == 0 }

    /// Stops registration (nesting: each call needs an `enable`). Changes made
    /// meanwhile cannot be undone (LIFE-23).
    public func disableUndoRegistration() { disabledCount += 1 }
    public func enableUndoRegistration() {
        // Trap kept (issue 28 audit): unbalanced calls, which NSUndoManager raises on too.
        precondition(disabledCount > 0, "ObjectGraph: enableUndoRegistration() without a matching disableUndoRegistration()")
        disabledCount -= 1
    }

    public func beginUndoGrouping(named name: String? = nil) { openGroups.append(Group(actions: [], name: name)) }

    public func endUndoGrouping() {
        // Trap kept (issue 28 audit): unbalanced calls, which NSUndoManager raises on too.
        precondition(!openGroups.isEmpty, "ObjectGraph: endUndoGrouping() without beginUndoGrouping()")
        let group = openGroups.removeLast()
        guard !group.actions.isEmpty else { return }
        if openGroups.isEmpty { push(group) } else { openGroups[openGroups.count - 1].actions.append(contentsOf: group.actions) }
    }

    /// Registers an action that reverses a change; during `undo()` it is
    /// recorded as a redo step instead. Contexts register their own groups;
    /// applications may add actions for state outside the object graph.
    public func registerUndo(_ action: @escaping () -> Void) {
        guard isUndoRegistrationEnabled else { return }
        if collecting != nil { collecting!.actions.append(action); return }
        if !openGroups.isEmpty { openGroups[openGroups.count - 1].actions.append(action); return }
        push(Group(actions: [action]))
    }

    private func push(_ group: Group) {
        undoStack.append(group)
        redoStack.removeAll()
        trim()
    }

    private func trim() {
        if levelsOfUndo > 0, undoStack.count > levelsOfUndo { undoStack.removeFirst(undoStack.count - levelsOfUndo) }
    }

    /// Reverses the latest group; its reversal becomes a redo step (MOC-UN-03).
    public func undo() {
        while !openGroups.isEmpty { endUndoGrouping() }
        guard let group = undoStack.popLast() else { return }
        isUndoing = true
        collecting = Group(actions: [], name: group.name)
        for action in group.actions.reversed() { action() }
        let inverse = collecting!
        collecting = nil
        isUndoing = false
        if !inverse.actions.isEmpty { redoStack.append(inverse) }
    }

    /// Reverses the latest undo (MOC-UN-04).
    public func redo() {
        guard let group = redoStack.popLast() else { return }
        isRedoing = true
        collecting = Group(actions: [], name: group.name)
        for action in group.actions.reversed() { action() }
        let inverse = collecting!
        collecting = nil
        isRedoing = false
        if !inverse.actions.isEmpty { undoStack.append(inverse); trim() }
    }

    public func removeAllActions() {
        undoStack.removeAll()
        redoStack.removeAll()
        openGroups.removeAll()
    }
}
