import Attled
import BLEWire
import BLETransport
import LEDProfile
import BLETrace

public enum Usage {
    public static let line = "usage: attled [set|scan|get|send|listen|gatt|read|write|ui|bonds|gateway|decode] [-i TRANSPORT] [--name NAME | --service UUID | --address ADDR] [--rgb R,G,B] [options]"

    public static let help = """
    \(line)

    attled drives a Bluetooth LE controller directly over HCI (no bluetoothd) to
    find an LED peripheral, connect, discover its LED service and write a colour.

    Commands (default: set):
      set               write --rgb to the device's LED (the default command)
      get               read the colour back
      send --value HEX  write raw bytes to the command characteristic (harness: 01/00, 03/04)
      listen            subscribe and print notifications until Ctrl-C or --count N
                        (--char UUID|0xHHHH: any characteristic of any GATT server)
      gatt [--values]   list services (primary and secondary, with includes), characteristics
                        (handles, properties) and descriptors; --values reads every readable one
      read --char C     read a characteristic or descriptor of any GATT server (long values in full);
                        several --char: all in one round trip (Read Multiple Variable Length)
      write --char C --value HEX [--without-response]
                        write one (Write Request; Write Command with --without-response or when
                        it only allows that; Prepare/Execute Write when longer than ATT_MTU-3)
      ui                full-screen colour sliders (harness: buttons), reconnecting as needed
      scan              list advertising devices
      bonds [--remove ADDR]  list the stored bonds (pairing keys), or remove one
      gateway --mqtt HOST[:PORT]
                        bridge the LED devices around to MQTT and Home Assistant (discovery,
                        commands, state, availability); runs until SIGINT/SIGTERM
      decode FILE       decode a btsnoop capture (- for stdin)

    Transport (default hci0; also ATTLED_TRANSPORT in the environment):
      -i, --transport SPEC   hciN | serial:/dev/ttyACM0[,BAUD][,rtscts] | tcp:HOST:PORT | unix:/PATH

    Target (one of; without any, the first device advertising a known LED service):
      --name NAME            advertised local name (complete, or shortened prefix)
      --service UUID         advertised service UUID
      --address ADDR         connect directly, no scan (ADDR[,public|,random]; default random)
    --name and --address may be repeated: set, get, send and listen then drive
    every target at once over concurrent links (one scan serves them all).

    Device profile (detected from the advertised or discovered service):
      --profile pycom|particle|harness
      --service UUID --red UUID --green UUID --blue UUID   any other RGB device

    Options:
      --rgb R,G,B            colour: 255,0,0 | #ff0000 | red, green, blue, white, off, ...
      --value HEX            bytes for send/write, up to 512 (01, 0x0103, "01 03")
      --without-response     write: use Write Command
      --values               gatt: read every readable characteristic and descriptor
      --char C               0x10 or 0x0010 (a handle, 1-4 hex digits), a UUID (2a37 or 128-bit), or red|green|blue;
                             for read/write/listen on any device, send/get on an LED (default:
                             the profile's); --service UUID narrows a UUID to that service
      --count N              listen: stop after N notifications
      --passive              scan: passive scanning (no scan requests)
      --extended             use the extended scan/connect commands when the controller lists them
      --timeout SECONDS      deadline for the whole run (scan: how long to scan)
      --connect-timeout MS   deadline for connecting (default 5000)
      --att-timeout MS       deadline per ATT transaction (default 3000)
      --no-cache             do not use or update the GATT/address cache
      --own-address ADDR     our static random address (default: the controller's public
                             address, else one made once and kept with the bonds)
      --trust-cache          skip the Database Hash check of cached handles (saves a round trip)
      --pair                 pair (or encrypt with the stored bond) before anything else
      --no-pair              never pair; by default attled pairs (LE Secure Connections, Just
                             Works; legacy if the device has no SC) when the device answers
                             Insufficient Authentication/Encryption or sends a Security Request,
                             and encrypts up front with a stored bond
      --no-repair            when the device has forgotten the bond, fail instead of pairing again
      --mqtt-user U, --mqtt-password-file F, --mqtt-tls-ca PEM
                             gateway: broker credentials (the password from a file) and TLS
      --topic-prefix P       gateway: topic prefix (default attled)
      --discovery-prefix P   gateway: Home Assistant discovery prefix (default homeassistant)
      --gateway-id ID        gateway: this gateway's id in topics (default gateway)
      --max-links N          gateway: at most N links at once
      --no-accept-list       gateway, ui: reconnect by scanning, not from the controller's Filter Accept List
      --json                 machine-readable output on stdout
      --quiet, -q            no progress lines on stderr
      --trace[=hex|=keys]    decode every packet on stderr (=hex adds raw bytes; keys are
                             masked unless =keys)
      --btsnoop FILE         write a btsnoop capture (Wireshark, btmon)
      -h, --help             this text;  --version

    Exit codes: 0 ok, 3 device not found, 4 connection failed, 5 service or
    characteristic not found, 6 ATT error from the device, 7 device stopped
    answering or link lost, 8 pairing or encryption failed, 64 usage, 65 bad input file, 69 transport or adapter
    unavailable, 74 transport lost, 75 adapter busy, 76 controller error,
    77 permission denied, 130/143 interrupted (SIGINT/SIGTERM).
    """

    public static let version = "attled \(AttledVersion.string)"
}
