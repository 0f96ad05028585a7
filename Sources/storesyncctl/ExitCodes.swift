import ArgumentParser

/// Exit statuses from sysexits(3), the Linux convention for command-line tools.
enum SysExit {
    /// A check found what it looks for: `verify` found differences (the
    /// `diff`/`cmp` convention: 0 same, 1 different, above that trouble).
    static let differences = ExitCode(1)
    /// EX_USAGE: the command was used incorrectly.
    static let usage = ExitCode(64)
    /// EX_DATAERR: the input data was incorrect (a bad model, a bad predicate).
    static let dataError = ExitCode(65)
    /// EX_NOINPUT: an input file did not exist or was not readable.
    static let noInput = ExitCode(66)
    /// EX_TEMPFAIL: try again later (the store stayed locked by a writer;
    /// the daemon did not answer within the timeout).
    static let temporaryFailure = ExitCode(75)
    /// EX_SOFTWARE: an internal software error.
    static let software = ExitCode(70)
    /// EX_IOERR: a socket failed in a way none of the others name.
    static let ioError = ExitCode(74)
    /// EX_PROTOCOL: the control socket answered, but not as storesyncd.
    static let protocolError = ExitCode(76)
    /// EX_NOPERM: this user may not use the control socket.
    static let noPermission = ExitCode(77)
    /// EX_CONFIG: the configuration named with --config cannot be used.
    static let config = ExitCode(78)
}

/// Exit statuses of the commands that talk to storesyncd (docs/CONTROL.md).
/// 1 and 3 follow systemctl's `status`: scripts already know them.
enum DaemonExit {
    /// `status`: something is behind, paused, failed or in conflict. Other
    /// commands: the daemon refused or failed the request (a reload refused,
    /// no such group, a round that failed).
    static let notOK = ExitCode(1)
    /// storesyncd is not running: nothing accepts on the control socket.
    static let notRunning = ExitCode(3)

    /// The table printed in every daemon command's --help.
    static let help = """
        Exit status:
          0   done (status: every store in sync)
          1   status: something is behind, paused, failed or in conflict;
              other commands: the daemon refused or failed the request
          3   storesyncd is not running (no socket, or nothing accepts on it)
          64  usage error
          74  socket error
          75  the daemon did not answer within --timeout
          76  the socket answered, but not as storesyncd
          77  permission denied (the socket is 0660; root or the daemon's user only)
          78  the --config file cannot be used
        """
}
