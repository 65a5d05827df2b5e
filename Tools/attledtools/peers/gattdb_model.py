"""gattdb's database model: services, characteristics and descriptors drawn at
random from a seed (plain data, no Bumble objects; see gattdb.py)."""

from __future__ import annotations

import random
import uuid as uuidlib
from dataclasses import dataclass, field

from bumble.gatt import Characteristic

Props = Characteristic.Properties

PROPERTY_NAMES = ["broadcast", "read", "write-without-response", "write", "notify", "indicate",
                  "signed-write", "extended"]
# The five properties combined: read, write without response, write, notify, indicate.
COMBINABLE = (Props.READ, Props.WRITE_WITHOUT_RESPONSE, Props.WRITE, Props.NOTIFY, Props.INDICATE)
ALL_COMBINATIONS = [
    Props(sum(p for i, p in enumerate(COMBINABLE) if mask & (1 << i))) for mask in range(1, 32)
]
SPECIAL_LENGTHS = (1, 22, 23, 400, 2, 255)
MAX_VALUE = 400
UUID_CUD = "2901"
UUID_CCCD = "2902"


# -----------------------------------------------------------------------------
# The model, generated from the seed (plain data, no Bumble)
# -----------------------------------------------------------------------------
@dataclass
class DescModel:
    uuid: str
    value: bytes
    writable: bool


@dataclass
class CharModel:
    uuid: str
    props: Props
    value: bytes
    descriptors: list[DescModel] = field(default_factory=list)


@dataclass
class ServiceModel:
    uuid: str
    primary: bool
    chars: list[CharModel] = field(default_factory=list)
    includes: list[int] = field(default_factory=list)  # indices into the secondary list


@dataclass
class DbModel:
    seed: int
    secondaries: list[ServiceModel]
    primaries: list[ServiceModel]


def _uuid16(rng: random.Random) -> str:
    # Outside the GATT declaration/descriptor (0x28xx/0x29xx) and GAP/GATT ranges.
    return f"{rng.randrange(0xB000, 0xC000):04x}"


def _uuid128(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128)))


def props_names(props: int) -> list[str]:
    return [name for bit, name in enumerate(PROPERTY_NAMES) if props & (1 << bit)]


def generate(seed: int) -> DbModel:
    """The database for ``seed`` (see the module docstring for its shape)."""
    rng = random.Random(seed)
    n_primary = rng.randint(3, 6)
    n_secondary = rng.randint(2, 3)

    secondaries = [ServiceModel(_uuid128(rng) if i != 1 and (i == 0 or rng.random() < 0.5) else _uuid16(rng), False)
                   for i in range(n_secondary)]
    kinds = ["16", "128"] + [rng.choice(["16", "128"]) for _ in range(n_primary - 2)]
    rng.shuffle(kinds)
    primaries = [ServiceModel(_uuid16(rng) if k == "16" else _uuid128(rng), True) for k in kinds]
    empty = rng.randrange(n_primary)
    full = [i for i in range(n_primary) if i != empty]

    # Includes: one primary includes the 128-bit and the 16-bit secondary (in a
    # random order); every secondary is included at least once, some twice.
    both = rng.choice(full)
    primaries[both].includes = rng.sample([0, 1], 2)
    for s in range(2, n_secondary):
        primaries[rng.choice(full)].includes.append(s)
    for s in range(n_secondary):
        if rng.random() < 0.3:
            other = rng.choice(full)
            if s not in primaries[other].includes:
                primaries[other].includes.append(s)

    # Characteristics: every combination, plus a few; spread over the
    # secondaries (1-2 each) and the non-empty primaries (at least one each).
    combos = list(ALL_COMBINATIONS) + [rng.choice(ALL_COMBINATIONS) for _ in range(rng.randint(0, 4))]
    rng.shuffle(combos)
    holders = [secondaries[i] for i in range(n_secondary)] + [primaries[i] for i in full]
    for i, holder in enumerate(holders):
        count = rng.randint(1, 2) if not holder.primary else 1
        for _ in range(count):
            holder.chars.append(CharModel("", combos.pop(), b""))
    primary_holders = [primaries[i] for i in full]
    while combos:
        rng.choice(primary_holders).chars.append(CharModel("", combos.pop(), b""))

    chars = [c for h in holders for c in h.chars]
    for ch in chars:
        ch.uuid = _uuid16(rng) if rng.random() < 0.5 else _uuid128(rng)
        if rng.random() < 0.4:
            names = ",".join(props_names(ch.props))
            ch.descriptors.append(DescModel(UUID_CUD, f"{ch.uuid[:4]} {names}".encode(), False))
        if rng.random() < 0.3:
            ch.descriptors.append(DescModel(_uuid128(rng), rng.randbytes(rng.randint(1, 30)), rng.random() < 0.5))
        rng.shuffle(ch.descriptors)
    # One UUID used twice, in two different services.
    a, b = rng.sample(range(len(holders)), 2)
    holders[b].chars[-1].uuid = holders[a].chars[0].uuid

    # A service that ends with a characteristic without descriptors: its last
    # characteristic swaps with one that has neither notify nor indicate.
    target = rng.choice(primary_holders)
    plain = [c for c in chars if not c.props & (Props.NOTIFY | Props.INDICATE)]
    pick = rng.choice(plain)
    owner = next(h for h in holders if any(c is pick for c in h.chars))
    i_pick = next(i for i, c in enumerate(owner.chars) if c is pick)
    owner.chars[i_pick], target.chars[-1] = target.chars[-1], pick
    pick.descriptors = []

    # Values: the first readable ones take the special lengths, the rest are
    # short or up to 400 bytes.
    special = list(SPECIAL_LENGTHS)
    for ch in chars:
        if ch.props & Props.READ and special:
            length = special.pop(0)
        else:
            length = rng.randint(1, 30) if rng.random() < 0.5 else rng.randint(1, MAX_VALUE)
        ch.value = rng.randbytes(length)
    return DbModel(seed, secondaries, primaries)
