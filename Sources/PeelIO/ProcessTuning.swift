import Glibc

/// Process-wide settings a gateway needs before it starts its loops.
public enum ProcessTuning {
    /// Raises the soft open-file limit to the hard limit: every client and upstream connection is a descriptor.
    public static func raiseFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}
