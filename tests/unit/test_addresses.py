"""The per-address limit's key: from the connection, through trusted proxies only."""

from __future__ import annotations

import pytest

from bsdemo.addresses import LOOPBACK, UNKNOWN, client_address, parse_trusted
from bsdemo.config import ConfigError

LOCAL_PROXY = parse_trusted("127.0.0.1")


@pytest.mark.parametrize(
    "peer,forwarded,trusted,expected",
    [
        # Streamlit reports a loopback peer (127.0.0.1 or ::1) as None: one loopback bucket
        (None, None, [], LOOPBACK),
        ("::1", None, [], LOOPBACK),
        ("::ffff:127.0.0.1", None, [], LOOPBACK),
        ("::ffff:203.0.113.9", None, [], "203.0.113.9"),  # IPv4-mapped is the IPv4 address
        ("203.0.113.9", None, [], "203.0.113.9"),
        # the web server took a forged header's entry as the peer: the real peer was loopback
        ("198.51.100.7", ["198.51.100.7"], [], LOOPBACK),
        ("198.51.100.7", ["10.9.9.9, 198.51.100.7"], [], LOOPBACK),
        # a direct client's own header counts for nothing
        ("203.0.113.9", ["198.51.100.7"], [], "203.0.113.9"),
        # behind a trusted local proxy that sets the header: the client it saw
        ("198.51.100.7", ["198.51.100.7"], LOCAL_PROXY, "198.51.100.7"),
        # the proxy appends: a client-forged entry left of the real one is not believed
        ("198.51.100.7", ["6.6.6.6, 198.51.100.7"], LOCAL_PROXY, "198.51.100.7"),
        # a remote trusted proxy, by network
        ("10.0.0.5", ["8.8.8.8, 10.1.1.1"], parse_trusted("10.0.0.0/8"), "8.8.8.8"),
        ("10.0.0.5", ["8.8.8.8"], parse_trusted("10.0.0.6"), "10.0.0.5"),  # not that proxy
        # IPv6 clients count by their /64
        ("2001:db8:1:2::1", None, [], "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::9", None, [], "2001:db8:1:2::/64"),
        # garbage shares one bucket: limited, never unlimited
        ("not an address", None, [], UNKNOWN),
        # every hop a trusted proxy: the farthest one named
        ("198.51.100.7", ["198.51.100.7"], LOCAL_PROXY + parse_trusted("0.0.0.0/0"), "198.51.100.7"),
    ],
)
def test_the_address_comes_from_the_connection_and_trusted_proxies(peer, forwarded, trusted, expected):
    assert client_address(peer, forwarded, trusted) == expected


def test_trusted_proxies_parse_and_bad_entries_are_named():
    assert [str(n) for n in parse_trusted(" 127.0.0.1, 10.0.0.0/8,,::1")] == [
        "127.0.0.1/32",
        "10.0.0.0/8",
        "::1/128",
    ]
    assert [str(n) for n in parse_trusted("::ffff:10.0.0.0/104")] == ["10.0.0.0/8"]
    assert parse_trusted(None) == [] and parse_trusted("") == []
    with pytest.raises(ConfigError) as err:
        parse_trusted("127.0.0.1, proxy.example")
    assert err.value.field == "BSDEMO_TRUSTED_PROXIES" and err.value.value == "proxy.example"
