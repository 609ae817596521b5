"""Which network address a browser connects from, for the per-address limit: one the client
cannot choose.

The web server (uvicorn, under Streamlit) already replaces the peer with the last
`X-Forwarded-For` entry whenever the peer is the loopback address, and Streamlit reports a
loopback peer as no address at all. Neither can be trusted by a class's server: anyone on the
machine, or anyone whose request a proxy passes on unchanged, could name any address. So the
address is worked out here again, from the connection alone unless the operator names the
proxies in front of the lab (`BSDEMO_TRUSTED_PROXIES`: addresses or networks, comma-separated):
- the peer the server saw; when that peer was rewritten from a header (it appears in
  X-Forwarded-For), the real peer was the loopback address;
- then, walking X-Forwarded-For from the right, past each hop that is a trusted proxy, to the
  first that is not: the client as the nearest trusted proxy saw it.
Addresses are normalised (an IPv4-mapped IPv6 address is the IPv4 one, ::1 is 127.0.0.1), an
IPv6 client counts by its /64 (one host's whole subnet, which it can rotate through), and a
connection with no usable address shares one bucket with every other such: limited together,
never unlimited. Pure Python.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from bsdemo.errors import ConfigError, clip

LOOPBACK = "127.0.0.1"
UNKNOWN = "unknown"  # the one bucket of every connection without a usable address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_trusted(raw: str | None) -> list[Network]:
    """BSDEMO_TRUSTED_PROXIES -> networks; raises ConfigError naming the first bad entry."""
    networks = []
    for item in (raw or "").split(","):
        item = item.strip()
        if not item:
            continue
        try:
            network = ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ConfigError(
                "BSDEMO_TRUSTED_PROXIES",
                clip(item),
                "IP addresses or networks (e.g. 127.0.0.1, 10.0.0.0/8), comma-separated",
            ) from None
        if (
            isinstance(network, ipaddress.IPv6Network)
            and network.prefixlen >= 96
            and (mapped := network.network_address.ipv4_mapped)
        ):
            network = ipaddress.ip_network(f"{mapped}/{network.prefixlen - 96}")
        networks.append(network)
    return networks


def _address(text: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """One address as a header or a socket gives it (brackets, a port, a zone), normalised."""
    text = (text or "").strip().strip('"')
    if text.startswith("["):  # [v6]:port
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # v4:port
        text = text.partition(":")[0]
    text = text.partition("%")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.is_loopback:
            return ipaddress.ip_address(LOOPBACK)
    return address


def _bucket(address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> str:
    if address is None:
        return UNKNOWN
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def _trusted(address, trusted: Iterable[Network]) -> bool:
    return address is not None and any(address.version == n.version and address in n for n in trusted)


def client_address(
    peer: str | None, forwarded_for: Iterable[str] | str | None, trusted: Iterable[Network] = ()
) -> str:
    """The per-address limit's key for one connection.

    peer: the address the web server reports (Streamlit's None for a loopback peer);
    forwarded_for: the X-Forwarded-For header's values; trusted: the operator's proxies.
    """
    if isinstance(forwarded_for, str):
        forwarded_for = [forwarded_for]
    hops = [part for value in (forwarded_for or ()) for part in str(value).split(",") if part.strip()]
    hop_addresses = [_address(h) for h in hops]
    seen = _address(peer) if peer is not None else ipaddress.ip_address(LOOPBACK)
    if peer is not None and seen is not None and seen in hop_addresses:
        seen = ipaddress.ip_address(LOOPBACK)  # the server took it from the header: not a peer
    trusted = list(trusted)
    current = seen
    while _trusted(current, trusted) and hop_addresses:
        current = hop_addresses.pop()
    return _bucket(current)
