#if canImport(Glibc)
import Glibc
#endif

/// "ECONNREFUSED (Connection refused)" for an errno value.
public func errnoName(_ e: Int32) -> String {
    let names: [Int32: String] = [
        EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", ENXIO: "ENXIO",
        EBADF: "EBADF", EAGAIN: "EAGAIN", EACCES: "EACCES", EBUSY: "EBUSY", ENODEV: "ENODEV",
        EINVAL: "EINVAL", EPIPE: "EPIPE", EAFNOSUPPORT: "EAFNOSUPPORT", ECONNREFUSED: "ECONNREFUSED",
        ECONNRESET: "ECONNRESET", ETIMEDOUT: "ETIMEDOUT", EHOSTUNREACH: "EHOSTUNREACH",
        ENETUNREACH: "ENETUNREACH", ERFKILL: "ERFKILL", EALREADY: "EALREADY", ENOTCONN: "ENOTCONN",
        EPROTONOSUPPORT: "EPROTONOSUPPORT", ENOTTY: "ENOTTY", EADDRINUSE: "EADDRINUSE",
    ]
    let text = strerror(e).map { String(cString: $0) } ?? "error"
    return "\(names[e] ?? "errno \(e)") (\(text))"
}
