// transport-spec: the input is the text of -i/--transport. TransportSpec.parse
// must return a spec or an invalidSpec error, and a spec must print as text
// that parses back to it.
import BLETransport

func fuzzTransportSpec(_ data: [UInt8]) {
    let text = String(decoding: data, as: UTF8.self)
    do {
        let spec = try TransportSpec.parse(text)
        let again = try? TransportSpec.parse(spec.description)
        require(again == spec, "'\(text)' parses to \(spec), whose text '\(spec.description)' parses to \(String(describing: again))")
    } catch let e as TransportError {
        guard case .invalidSpec = e else { require(false, "parse threw \(e)"); return }
        _ = e.description
    } catch {
        require(false, "parse threw \(type(of: error))")
    }
}
