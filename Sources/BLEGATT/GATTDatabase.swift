import BLEWire
import BLEHCI
import BLEATT

/// A server's whole database as a client sees it: every primary service,
/// the secondary services reachable through include declarations, and each
/// service's includes, characteristics and descriptors, in handle order.
public struct GATTDatabase: Hashable, Sendable {
    /// A characteristic and its descriptors.
    public struct CharacteristicEntry: Hashable, Sendable {
        public var characteristic: Characteristic
        public var descriptors: [Descriptor]
        /// An entry from a characteristic and its descriptors.
        public init(characteristic: Characteristic, descriptors: [Descriptor]) {
            self.characteristic = characteristic; self.descriptors = descriptors
        }
    }
    /// A service with what it holds.
    public struct ServiceEntry: Hashable, Sendable {
        public var service: Service
        public var includes: [IncludedService]
        public var characteristics: [CharacteristicEntry]
        /// An entry from a service, its includes and its characteristics.
        public init(service: Service, includes: [IncludedService], characteristics: [CharacteristicEntry]) {
            self.service = service; self.includes = includes; self.characteristics = characteristics
        }
    }
    /// Primary and secondary services, in handle order.
    public var services: [ServiceEntry]

    /// A database from its services (sorted by start handle).
    public init(services: [ServiceEntry]) { self.services = services.sorted { $0.service.start < $1.service.start } }

    /// Every characteristic with the service that holds it, in handle order.
    public var allCharacteristics: [(service: Service, entry: CharacteristicEntry)] {
        services.flatMap { s in s.characteristics.map { (s.service, $0) } }
    }

    /// The characteristics with `uuid`, optionally only in services with `serviceUUID`.
    public func characteristics(_ uuid: BluetoothUUID, inService serviceUUID: BluetoothUUID? = nil) -> [(service: Service, entry: CharacteristicEntry)] {
        allCharacteristics.filter { $0.entry.characteristic.uuid == uuid && (serviceUUID == nil || $0.service.uuid == serviceUUID) }
    }

    /// The characteristic whose value handle is `handle`.
    public func characteristic(valueHandle handle: UInt16) -> (service: Service, entry: CharacteristicEntry)? {
        allCharacteristics.first { $0.entry.characteristic.valueHandle == handle }
    }
}

extension GATTClient {
    /// Discovers the whole database: all primary services (4.4.1), the
    /// includes of each (4.5.1) and so the secondary services they name,
    /// then each service's characteristics (4.6.1) and, when `descriptors`,
    /// each characteristic's descriptors (4.7.1; none asked for where the
    /// value is the characteristic's last handle).
    /// - Returns: a future of the database.
    public func startDiscoverDatabase(descriptors: Bool = true) -> Future<GATTDatabase> {
        var entries: [UInt16: GATTDatabase.ServiceEntry] = [:]
        var work: [Service] = []
        return startDiscoverPrimaryServices().flatMap { primaries -> Future<Void> in
            work = primaries
            for s in primaries { entries[s.start] = GATTDatabase.ServiceEntry(service: s, includes: [], characteristics: []) }
            // Includes first: they name the secondary services, whose own includes are followed too.
            return self.iterate(from: 0) { _ in
                guard !work.isEmpty else { return Future(value: nil) }
                let s = work.removeFirst()
                return self.startFindIncludedServices(of: s).map { incs -> UInt16? in
                    entries[s.start]?.includes = incs
                    for inc in incs where entries[inc.start] == nil {
                        let sec = Service(uuid: inc.uuid, start: inc.start, end: inc.end, isPrimary: false)
                        entries[inc.start] = GATTDatabase.ServiceEntry(service: sec, includes: [], characteristics: [])
                        work.append(sec)
                    }
                    return 0
                }
            }
        }.flatMap { () -> Future<Void> in
            let ordered = entries.keys.sorted()
            return sequentially(ordered) { start in
                guard let svc = entries[start]?.service else { return .done }
                return self.startDiscoverCharacteristics(of: svc).flatMap { chars -> Future<Void> in
                    var list = chars.map { GATTDatabase.CharacteristicEntry(characteristic: $0, descriptors: []) }
                    guard descriptors else { entries[start]?.characteristics = list; return .done }
                    return sequentially(Array(list.indices)) { i in
                        self.startDiscoverDescriptors(of: list[i].characteristic).map { list[i].descriptors = $0 }
                    }.map { entries[start]?.characteristics = list }
                }
            }
        }.map { GATTDatabase(services: Array(entries.values)) }
    }

    /// Blocking form of `startDiscoverDatabase(descriptors:)`.
    /// - Throws: `ATTError`, `GATTError`, `HCIError`.
    public func discoverDatabase(descriptors: Bool = true) throws -> GATTDatabase { try host.wait(startDiscoverDatabase(descriptors: descriptors)) }
}
