import PeelIO

/// `--offline-store-password-file`: the password on one line (`requirepass`, Redis's default user),
/// or an ACL user on the first line and its password on the second. Lines, not `user password` on
/// one line, because a password may hold spaces. One trailing newline is ignored, as for the
/// secret file (`echo` adds one; a Kubernetes Secret usually lacks it).
enum RedisPasswordFile {
    /// Why a file was refused: its shape, never its bytes.
    struct Problem: Error {
        let reason: String
    }

    /// The credentials a file's bytes hold.
    static func parse(_ bytes: [UInt8]) -> Result<RedisCredentials, Problem> {
        var b = bytes[...]
        if b.last == 0x0A { b = b.dropLast() }
        if b.last == 0x0D { b = b.dropLast() }
        let lines = b.split(separator: 0x0A, omittingEmptySubsequences: false).map { line in
            line.last == 0x0D ? Array(line.dropLast()) : Array(line)
        }
        switch lines.count {
        case 1:
            guard !lines[0].isEmpty else { return .failure(Problem(reason: "is empty; it must hold the password")) }
            return .success(RedisCredentials(user: nil, password: lines[0]))
        case 2:
            let (user, password) = (lines[0], lines[1])
            // Redis ACL user names are one argument without spaces (ACL SETUSER).
            guard !user.isEmpty, user.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
                return .failure(Problem(reason: "its first line must be an ACL user name (no spaces), the second the password"))
            }
            guard !password.isEmpty else { return .failure(Problem(reason: "its second line (the password) is empty")) }
            return .success(RedisCredentials(user: user, password: password))
        default:
            return .failure(Problem(reason: "has \(lines.count) lines; it must hold the password, or a user and a password on two lines"))
        }
    }
}
