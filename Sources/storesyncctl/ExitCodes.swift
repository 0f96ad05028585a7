import ArgumentParser

/// Exit statuses from sysexits(3), the Linux convention for command-line tools.
enum SysExit {
    /// EX_USAGE: the command was used incorrectly.
    static let usage = ExitCode(64)
    /// EX_DATAERR: the input data was incorrect (a bad model, a bad predicate).
    static let dataError = ExitCode(65)
    /// EX_NOINPUT: an input file did not exist or was not readable.
    static let noInput = ExitCode(66)
    /// EX_IOERR: an error while doing I/O on a file (writing a store failed: a full disk).
    static let ioError = ExitCode(74)
    /// EX_TEMPFAIL: try again later (the store stayed locked by a writer).
    static let temporaryFailure = ExitCode(75)
    /// EX_SOFTWARE: an internal software error.
    static let software = ExitCode(70)
}
