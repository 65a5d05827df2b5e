"""The peers of the attled test world: LED peripherals built on Bumble.

Three GATT profiles mimic the fixed firmware that attled must drive:

* ``pycom``    (LoPy4): red/green/blue characteristics, READ|WRITE
  (Write Request only), one byte each.
* ``particle`` (Xenon/Mesh): red/green/blue characteristics,
  READ|WRITE_WITHOUT_RESPONSE (Write Command only), one byte each.
* ``harness``  (Arduino): a READ|WRITE command characteristic taking one-byte
  commands (1/0 press/release button 1, 3/4 press/release button 2) and a
  READ|NOTIFY button characteristic (with CCCD) that notifies every accepted
  command byte.

Bumble's GATT server does not enforce characteristic properties (a Write
Request to a write-without-response-only characteristic succeeds there), so
this module screens every ATT PDU that reaches the server before Bumble sees
it, as real firmware would:

* Write Request / Prepare Write Request to a characteristic without WRITE, or
  to a declaration / read-only descriptor: ATT Error 0x03 Write Not Permitted.
* Write Command to a characteristic without WRITE_WITHOUT_RESPONSE: dropped.
* Signed Write Command without AUTHENTICATED_SIGNED_WRITES: dropped.
* A value whose length is not 1 for an LED/command characteristic: ATT Error
  0x0D Invalid Attribute Value Length (requests), dropped (commands).
* Read Request / Read Blob Request to a characteristic without READ:
  ATT Error 0x02 Read Not Permitted.

Every observable thing is reported through an ``emit(dict)`` callback (vworld
turns these into JSON lines); see ``LedPeripheral`` (peripheral.py) for the
event shapes.

Fault options (``fault_*`` keys, see ``FAULT_HELP`` in faultspec.py) turn the peripheral into a
misbehaving peer for robustness tests: it can disconnect, stay silent, answer
with the wrong opcode, send truncated or oversized PDUs, unsolicited Error
Responses, notifications for undeclared handles, notification floods and
indications, ask for a 23-byte MTU and request illegal connection parameters.

Security options (``SECURITY_HELP`` in options.py): ``secure=enc`` makes the LED
characteristics (and the button CCCD) need an encrypted link (Bumble's
READ/WRITE_REQUIRES_ENCRYPTION permissions: a Read or Write Request gets ATT
Error 0x0F Insufficient Encryption, a Write Command is dropped silently with
a ``write_dropped`` event); ``pairing=sc|legacy`` pairs Just Works with
bonding, LE Secure Connections or legacy only; bonds are kept in an in-memory
key store for the world's lifetime, so a central that comes back encrypts
with its stored LTK; ``forget_bonds=N`` forgets them all when the N-th
connection ends (the next encryption attempt gets status 0x06).

Profile ``gattdb`` (gattdb.py, listed in OTHER_PROFILES) is a
LedPeripheral subclass with a random GATT database built from a seed in place
of an LED service; it shares the options, the ATT screen and the faults.

The modules, one part each:

    profiles.py     the GATT profiles (PROFILES, OTHER_PROFILES)
    options.py      PeripheralOptions.parse(): the ``NAME:PROFILE[:key=value,...]``
                    syntax; SECURITY_HELP
    faultspec.py    the fault options' syntax (Fault, FAULT_KINDS, FAULT_HELP)
    advertising.py  the legacy advertising data
    peripheral.py   LedPeripheral(opts, emit): the Bumble Device around a
                    ``bumble.host.Host``; ``await p.start()`` powers it on and
                    advertises; make_peripheral() picks the profile's class
    link.py         its connections (LinkMixin)
    security.py     pairing, bonds, LTK requests (SecurityMixin)
    attscreen.py    the ATT screen (AttScreenMixin)
    faults.py       what the faults do (FaultMixin)
    gattdb.py       the random GATT database peer (gattdb_model.py: the
                    database drawn from a seed; gattdb_server.py: on
                    Bumble's server, and as JSON)
"""
