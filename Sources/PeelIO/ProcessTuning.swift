import CEvent
import Glibc

/// Process-wide settings a gateway needs before it starts its loops.
public enum ProcessTuning {
    /// Pins glibc's mmap and trim thresholds at 128 KiB. glibc raises its mmap threshold each time a
    /// large block is freed, after which 256 KiB transfer buffers and big bodies come from the heap
    /// and fragment it: RSS crept ~2 MB per 50k calls under load; pinned, it stays flat
    /// (scripts/reliability.sh measures it).
    public static func pinAllocatorThresholds() {
        mallopt(M_MMAP_THRESHOLD, 128 * 1024)
        mallopt(M_TRIM_THRESHOLD, 128 * 1024)
    }

    /// Raises the soft open-file limit to the hard limit: every client and upstream connection is a descriptor.
    public static func raiseFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}
