"""Security of a peer: Just Works pairing (SC or legacy) with bonding, the bonds
in an in-memory key store, the LE Long Term Key Request, and the events
around them (see SECURITY_HELP in options.py).
"""

from __future__ import annotations

import os
import random
from typing import Any

from bumble import att, pairing, smp
from bumble.device import Connection, Device
from bumble.host import Host
from bumble.keys import MemoryKeyStore

# Attribute permissions of a characteristic / CCCD with secure=enc.
ENCRYPTION_REQUIRED = (
    att.Attribute.Permissions.READ_REQUIRES_ENCRYPTION | att.Attribute.Permissions.WRITE_REQUIRES_ENCRYPTION
)


class PeerSmpSession(smp.Session):
    """Bumble's SMP session with a random EDIV/Rand for the legacy LTK.

    Bumble 0.0.236 distributes its legacy LTK with EDIV 0 and Rand 0 (its
    ltk_ediv/ltk_rand are never drawn), the values that also name the STK
    during pairing.  Real firmware draws them, so a central that stores or
    sends them wrongly must fail here too: they are drawn per session, and
    the STK is looked up by the zero EDIV/Rand of pairing-time encryption.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ltk_ediv = random.randint(1, 0xFFFF)
        self.ltk_rand = os.urandom(8)

    def get_long_term_key(self, rand: bytes, ediv: int) -> bytes | None:
        if self.sc:
            return self.ltk  # None until the DHKey Check
        if not self.completed:
            return self.stk if (rand, ediv) == (bytes(8), 0) else None
        return self.ltk if (rand, ediv) == (self.ltk_rand, self.ltk_ediv) else None


class SecurityMixin:
    """LedPeripheral's security part (peripheral.py): uses self.opts, self.device,
    self.emit, self._spawn and self._peer_auth_req (the AuthReq of the central's
    Pairing Request on the current connection)."""

    def _pairing_config(self, connection: Connection | None = None) -> pairing.PairingConfig:
        """Just Works (NoInputNoOutput) with bonding; SC or legacy per pairing=.

        Both sides' keys are asked for and given: the peer's IRK + identity
        (its static random address) and, legacy, its LTK/EDIV/Rand; the
        central's IRK + identity and, legacy, its LTK.
        """
        keys = (pairing.PairingDelegate.KeyDistribution.DISTRIBUTE_ENCRYPTION_KEY
                | pairing.PairingDelegate.KeyDistribution.DISTRIBUTE_IDENTITY_KEY)
        return pairing.PairingConfig(
            sc=self.opts.pairing == "sc",
            mitm=False,
            bonding=True,
            delegate=pairing.PairingDelegate(
                io_capability=pairing.PairingDelegate.IoCapability.NO_OUTPUT_NO_INPUT,
                local_initiator_key_distribution=keys,
                local_responder_key_distribution=keys,
            ),
            identity_address_type=pairing.PairingConfig.AddressType.RANDOM,
        )

    def _install_security(self, device: Device, host: Host) -> None:
        # An in-memory key store of our own (for the world's lifetime): the
        # bonds, looked up by the central's (identity) address.
        device.keystore = MemoryKeyStore()
        device.pairing_config_factory = self._pairing_config
        device.smp_session_proxy = PeerSmpSession
        # Device sets host.long_term_key_provider = device.get_long_term_key;
        # ours answers from the SMP session or the bond and reports it.
        host.long_term_key_provider = self._long_term_key

    async def _long_term_key(self, handle: int, rand: bytes, ediv: int) -> bytes | None:
        """The LE Long Term Key Request: the key, or None for a negative reply.

        Bumble's own provider answers a legacy bond with ltk_peripheral (the
        LTK the *central* distributed, or b"" when it sent none) where the
        peripheral must use the LTK it distributed itself; here a bond's
        legacy LTK is the one we gave, matched by EDIV and Rand, and an SC
        LTK is used with EDIV 0 / Rand 0 only.
        """
        assert self.device is not None and self.device.keystore is not None
        connection = self.device.lookup_connection(handle)
        ltk: bytes | None = None
        source = "none"
        if connection is not None:
            session = self.device.smp_manager.sessions.get(handle)
            if session is not None and not session.completed:
                ltk = session.get_long_term_key(rand, ediv)
                source = "pairing" if ltk else source
            if ltk is None:
                keys = await self.device.keystore.get(str(connection.peer_address))
                if keys is not None:
                    if keys.ltk is not None and (rand, ediv) == (bytes(8), 0):
                        ltk = keys.ltk.value
                    elif keys.ltk_central is not None and (keys.ltk_central.rand, keys.ltk_central.ediv) == (rand, ediv):
                        ltk = keys.ltk_central.value  # the one we distributed (Bumble's naming)
                    source = "bond" if ltk else source
        self.emit("ltk_request", found=ltk is not None, source=source, ediv=ediv, rand=rand.hex())
        return ltk

    def _during_pairing(self, connection: Connection) -> bool:
        assert self.device is not None
        session = self.device.smp_manager.sessions.get(connection.handle)
        return session is not None and not session.completed

    def _watch_security(self, connection: Connection) -> None:
        def on_encryption_change() -> None:
            self.emit("encryption", enabled=bool(connection.encryption), status=0,
                      key_size=connection.encryption_key_size, during_pairing=self._during_pairing(connection))

        def on_encryption_failure(error: int) -> None:
            self.emit("encryption", enabled=False, status=int(error), key_size=0,
                      during_pairing=self._during_pairing(connection))

        def on_pairing(keys) -> None:
            auth_req = self._peer_auth_req or 0
            bonded = bool(auth_req & smp.AuthReq.BONDING)  # and ours (always bonding)
            identity = str(connection.peer_address).split("/")[0]
            fields = dict(result="complete", sc=bool(connection.sc), bonded=bonded, identity=identity,
                          irk=keys.irk is not None)
            if bonded:
                self.emit("pairing", **fields)
                return

            # Bumble stores the keys whatever the Bonding flags said; a device
            # that did not bond keeps nothing.
            async def drop() -> None:
                assert self.device is not None and self.device.keystore is not None
                await self.device.keystore.delete(str(connection.peer_address))
                self.emit("pairing", **fields)

            self._spawn(drop())

        def on_pairing_failure(reason: int) -> None:
            self.emit("pairing", result="failed", reason=int(reason))

        connection.on(Connection.EVENT_CONNECTION_ENCRYPTION_CHANGE, on_encryption_change)
        connection.on(Connection.EVENT_CONNECTION_ENCRYPTION_FAILURE, on_encryption_failure)
        connection.on(Connection.EVENT_PAIRING, on_pairing)
        connection.on(Connection.EVENT_PAIRING_FAILURE, on_pairing_failure)

    def forget_bonds(self) -> int:
        """Forget every bond now (synchronously); returns how many there were."""
        assert self.device is not None
        keystore = self.device.keystore
        assert isinstance(keystore, MemoryKeyStore)
        count = len(keystore.all_keys)
        keystore.all_keys.clear()
        self.device.address_resolver = smp.AddressResolver([])
        self.emit("bonds_forgotten", count=count)
        return count

    def _install_smp_observer(self, device: Device) -> None:
        channels = device.l2cap_channel_manager.fixed_channels
        inner = channels[smp.SMP_CID]

        def observe(connection, pdu: bytes) -> None:
            self.emit("smp", code=pdu[0] if pdu else -1, pdu=pdu.hex())
            if len(pdu) >= 4 and pdu[0] == smp.CommandCode.PAIRING_REQUEST:
                self._peer_auth_req = pdu[3]  # AuthReq (Core Vol 3, Part H, 3.5.1)
            inner(connection, pdu)

        channels[smp.SMP_CID] = observe

