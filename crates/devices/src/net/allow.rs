//! Which addresses may be dialled or announced: a list of `HOST!PORT`
//! patterns, HOST an address, a network (`ADDR/BITS`) or `*`, PORT a
//! number or `*`.

use std::net::{IpAddr, SocketAddr};

/// An allow-list of `HOST!PORT` patterns (`127.0.0.1!*`, `10.0.0.0/8!22`,
/// `*!80`, `*!*`). HOST is an address as written in `connect` messages
/// (IPv4 or IPv6), or a network of them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allow {
    patterns: Vec<(Hosts, Option<u16>)>,
}

/// The hosts a pattern admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hosts {
    Any,
    /// Addresses whose first `bits` bits are those of the address.
    Net(IpAddr, u8),
}

impl Hosts {
    fn parse(host: &str) -> Option<Hosts> {
        if host == "*" {
            return Some(Hosts::Any);
        }
        let (addr, bits) = host.split_once('/').unwrap_or((host, ""));
        let addr: IpAddr = addr.parse().ok()?;
        let all = if addr.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            "" => all,
            bits => bits.parse().ok().filter(|&b| b <= all)?,
        };
        Some(Hosts::Net(addr, bits))
    }

    fn admits(self, ip: IpAddr) -> bool {
        match (self, ip.to_canonical()) {
            (Hosts::Any, _) => true,
            (Hosts::Net(IpAddr::V4(net), bits), IpAddr::V4(ip)) => {
                prefix(net.to_bits().into(), ip.to_bits().into(), 32, bits)
            }
            (Hosts::Net(IpAddr::V6(net), bits), IpAddr::V6(ip)) => {
                prefix(net.to_bits(), ip.to_bits(), 128, bits)
            }
            _ => false,
        }
    }
}

/// Whether `a` and `b`, numbers of `width` bits, agree in their first
/// `bits` bits.
fn prefix(a: u128, b: u128, width: u8, bits: u8) -> bool {
    let shift = width - bits;
    shift >= 128 || (a >> shift) == (b >> shift)
}

impl Allow {
    /// Everything.
    pub fn any() -> Allow {
        Allow {
            patterns: vec![(Hosts::Any, None)],
        }
    }

    /// Nothing.
    pub fn none() -> Allow {
        Allow::default()
    }

    /// The list written as comma-separated patterns; fails on a pattern
    /// that is not HOST!PORT as above.
    pub fn parse(list: &str) -> Result<Allow, String> {
        let patterns = list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                let bad = || format!("{p:?}: want HOST!PORT (HOST an address, ADDR/BITS or *; PORT a number or *)");
                let (host, port) = p.rsplit_once('!').ok_or_else(bad)?;
                let hosts = Hosts::parse(host).ok_or_else(bad)?;
                let port = match port {
                    "*" => None,
                    port => Some(port.parse().map_err(|_| bad())?),
                };
                Ok::<_, String>((hosts, port))
            })
            .collect::<Result<_, _>>()?;
        Ok(Allow { patterns })
    }

    /// True if some pattern admits `addr`.
    pub fn admits(&self, addr: SocketAddr) -> bool {
        self.patterns
            .iter()
            .any(|&(hosts, port)| hosts.admits(addr.ip()) && port.is_none_or(|p| p == addr.port()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits(list: &str, addr: &str) -> bool {
        Allow::parse(list).unwrap().admits(addr.parse().unwrap())
    }

    #[test]
    fn patterns_admit_addresses_networks_and_ports() {
        assert!(admits("127.0.0.1!*", "127.0.0.1:80"));
        assert!(!admits("127.0.0.1!*", "127.0.0.2:80"));
        assert!(admits("10.0.0.0/24!22", "10.0.0.7:22"));
        assert!(!admits("10.0.0.0/24!22", "10.0.1.7:22"));
        assert!(!admits("10.0.0.0/24!22", "10.0.0.7:23"));
        assert!(admits("0.0.0.0/0!*", "192.168.1.1:1"));
        assert!(admits("*!443", "[::1]:443"));
        assert!(admits("fd00::/8!*", "[fd12::1]:9"));
        assert!(!admits("fd00::/8!*", "[fe80::1]:9"));
        // An IPv4 address written in IPv6 form is that IPv4 address.
        assert!(admits("10.0.0.0/8!*", "[::ffff:10.1.2.3]:5"));
        assert!(!admits("10.0.0.0/8!*", "[::1]:5"));
        assert!(admits("10.0.0.1!22, *!80", "1.2.3.4:80"));
    }

    #[test]
    fn bad_patterns_are_refused() {
        for bad in [
            "127.0.0.1",
            "host!80",
            "10.0.0.0/33!*",
            "1.2.3.4!http",
            "!80",
            "*!",
        ] {
            assert!(Allow::parse(bad).is_err(), "{bad}");
        }
    }
}
