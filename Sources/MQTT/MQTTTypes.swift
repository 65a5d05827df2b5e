#if canImport(Glibc)
import Glibc
#endif
import BLEWire
import BLETransport
import CMosquitto
import CMosquittoLoader

// MARK: - Codes libmosquitto and the broker hand back

/// A libmosquitto result code (`MOSQ_ERR_*`). Open, so a code a newer library
/// adds still prints (through `mosquitto_strerror`).
public struct MosquittoCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public init(_ raw: Int32) { self.rawValue = raw }

    public static let success = MosquittoCode(0)
    public static let noMemory = MosquittoCode(1)
    public static let protocolError = MosquittoCode(2)
    public static let invalid = MosquittoCode(3)
    public static let noConnection = MosquittoCode(4)
    public static let connectionRefused = MosquittoCode(5)
    public static let notFound = MosquittoCode(6)
    public static let connectionLost = MosquittoCode(7)
    public static let tls = MosquittoCode(8)
    public static let payloadSize = MosquittoCode(9)
    public static let notSupported = MosquittoCode(10)
    public static let auth = MosquittoCode(11)
    public static let aclDenied = MosquittoCode(12)
    public static let unknown = MosquittoCode(13)
    public static let errno = MosquittoCode(14)
    public static let addressLookup = MosquittoCode(15)
    public static let malformedUTF8 = MosquittoCode(18)
    public static let keepalive = MosquittoCode(19)
    public static let lookup = MosquittoCode(20)
    public static let tlsHandshake = MosquittoCode(23)
    public static let oversizePacket = MosquittoCode(25)

    /// libmosquitto's own text for the code.
    public var description: String {
        guard let s = mosquitto_strerror(rawValue) else { return "mosquitto error \(rawValue)" }
        return String(cString: s)
    }
}

/// The broker's CONNACK return code (MQTT 3.1.1 section 3.2.2.3). Open: a
/// broker may send codes this list does not name.
public struct MQTTConnack: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public init(_ raw: Int32) { self.rawValue = raw }

    public static let accepted = MQTTConnack(0)
    public static let unacceptableProtocolVersion = MQTTConnack(1)
    public static let identifierRejected = MQTTConnack(2)
    public static let serverUnavailable = MQTTConnack(3)
    public static let badUsernameOrPassword = MQTTConnack(4)
    public static let notAuthorised = MQTTConnack(5)

    // MQTT v5's reason codes (MQTT 5.0 section 3.2.2.2): a v5 connection is
    // refused with these, not with 1...5.
    public static let v5UnsupportedProtocolVersion = MQTTConnack(0x84)
    public static let v5ClientIdentifierNotValid = MQTTConnack(0x85)
    public static let v5BadUsernameOrPassword = MQTTConnack(0x86)
    public static let v5NotAuthorized = MQTTConnack(0x87)
    public static let v5ServerUnavailable = MQTTConnack(0x88)
    public static let v5ServerBusy = MQTTConnack(0x89)
    public static let v5Banned = MQTTConnack(0x8A)

    public var isAccepted: Bool { rawValue == 0 }

    /// libmosquitto's text for the code, and what to do about it.
    public var description: String {
        let name = rawValue >= 0x80 ? mosquitto_reason_string(rawValue) : mosquitto_connack_string(rawValue)
        let text = name.map { String(cString: $0) } ?? "CONNACK \(rawValue)"
        let advice: String
        switch self {
        case .accepted: return text
        case .unacceptableProtocolVersion, .v5UnsupportedProtocolVersion:
            advice = "the broker does not speak this MQTT version (the gateway speaks MQTT 5: mosquitto 1.6 or later, EMQX, HiveMQ)"
        case .identifierRejected, .v5ClientIdentifierNotValid: advice = "choose another client id"
        case .serverUnavailable, .v5ServerUnavailable, .v5ServerBusy: advice = "the broker is up but not serving; retry later"
        case .badUsernameOrPassword, .v5BadUsernameOrPassword: advice = "check the MQTT user name and the password file"
        // mosquitto answers a wrong password with 5 (v3.1.1) or 0x87 (v5), not 4 or 0x86.
        case .notAuthorised, .v5NotAuthorized: advice = "check the MQTT user name and the password file; else the broker's ACL and allow_anonymous"
        case .v5Banned: advice = "the broker bans this client; see its configuration"
        default: advice = "see the broker's log"
        }
        return "\(text) (CONNACK \(rawValue)): \(advice)"
    }
}

/// A failed MQTT client call: which operation, libmosquitto's reason, and what to do.
public enum MQTTError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A libmosquitto call returned `code`; `errno` is set for `MosquittoCode.errno`.
    case library(operation: String, code: MosquittoCode, errno: Int32)
    /// An option or argument refused before libmosquitto was asked.
    case invalidArgument(String)
    /// libmosquitto.so.1 could not be loaded (dlopen's reason).
    case libraryMissing(String)

    public var description: String {
        switch self {
        case let .library(op, code, e):
            var text = "mqtt \(op): \(code)"
            if code == .errno, e != 0 {
                text += " (" + (strerror(e).map { String(cString: $0) } ?? "errno \(e)") + ")"
            }
            if let advice = MQTTError.advice(code, errno: e) { text += "; " + advice }
            return text
        case .invalidArgument(let what): return "mqtt: \(what)"
        case .libraryMissing(let why):
            return "mqtt: cannot load libmosquitto.so.1 (\(why)); the gateway needs Debian's libmosquitto1: apt install libmosquitto1"
        }
    }

    static func advice(_ code: MosquittoCode, errno e: Int32) -> String? {
        switch code {
        case .noConnection: return "not connected to the broker: connect first and wait for onConnect"
        case .connectionLost: return "the broker went away; reconnect with backoff"
        case .tls, .tlsHandshake:
            return "check that the CA file signed the broker's certificate and that the host name matches the certificate"
        case .addressLookup, .lookup: return "check the broker host name"
        case .payloadSize, .oversizePacket: return "the payload is larger than MQTT or the broker allows"
        case .malformedUTF8: return "topics must be valid UTF-8 without wildcards when publishing"
        case .auth: return "check the MQTT user name and the password file"
        case .invalid: return "an argument was refused (topic, QoS, keepalive or option)"
        case .errno:
            switch e {
            case ECONNREFUSED: return "nothing listens on that host and port; is the broker running?"
            case ENOENT: return "a file named in the options does not exist"
            case EACCES: return "permission denied reading a file named in the options"
            case ETIMEDOUT, EHOSTUNREACH, ENETUNREACH: return "the broker host cannot be reached"
            default: return nil
            }
        default: return nil
        }
    }
}

// MARK: - Options

/// MQTT quality of service (MQTT 3.1.1 section 4.3).
/// The MQTT protocol version a client speaks.
public enum MQTTVersion: Int32, Sendable {
    /// MQTT 3.1.1 (OASIS, 2014).
    case v311 = 4
    /// MQTT 5.0 (OASIS, 2019): properties, among them message expiry.
    case v5 = 5
}

public enum MQTTQoS: Int32, Sendable {
    case atMostOnce = 0
    case atLeastOnce = 1
    case exactlyOnce = 2
}

/// The message the broker publishes for us when the connection drops without
/// a DISCONNECT (MQTT 3.1.1 section 3.1.2.5).
public struct MQTTWill: Sendable, Equatable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: MQTTQoS
    public var retain: Bool

    public init(topic: String, payload: [UInt8], qos: MQTTQoS = .atLeastOnce, retain: Bool = true) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
    }
}

/// How to reach and log in to the broker.
public struct MQTTOptions: Sendable {
    public var host: String
    public var port: Int
    public var clientID: String
    public var username: String?
    /// The password itself; the caller reads it from a file (so it never appears
    /// in argv) and strips the trailing newline.
    public var password: String?
    /// PEM file with the CA certificate(s) that sign the broker's certificate;
    /// setting it turns TLS on. The broker's host name is checked against its certificate.
    public var tlsCAFile: String?
    /// Seconds between PINGREQs when idle (5...65535).
    public var keepalive: Int
    public var will: MQTTWill?
    public var cleanSession: Bool
    /// The protocol spoken: 3.1.1 (the default) or 5, which adds message expiry.
    public var version: MQTTVersion = .v311

    public init(host: String, port: Int = 1883, clientID: String, username: String? = nil, password: String? = nil,
                tlsCAFile: String? = nil, keepalive: Int = 30, will: MQTTWill? = nil, cleanSession: Bool = true) {
        self.host = host
        self.port = port
        self.clientID = clientID
        self.username = username
        self.password = password
        self.tlsCAFile = tlsCAFile
        self.keepalive = keepalive
        self.will = will
        self.cleanSession = cleanSession
    }
}
