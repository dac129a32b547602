//! Which addresses may be dialled or announced: a list of `HOST!PORT`
//! patterns, either part `*` for any.

use std::net::SocketAddr;

/// An allow-list of `HOST!PORT` patterns (`127.0.0.1!*`, `*!80`, `*!*`).
/// HOST is an address as written in `connect` messages (IPv4 or IPv6).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allow {
    patterns: Vec<(String, String)>,
}

impl Allow {
    /// Everything.
    pub fn any() -> Allow {
        Allow {
            patterns: vec![("*".into(), "*".into())],
        }
    }

    /// Nothing.
    pub fn none() -> Allow {
        Allow::default()
    }

    /// The list written as comma-separated patterns; fails on a pattern
    /// without its `!`.
    pub fn parse(list: &str) -> Result<Allow, String> {
        let patterns = list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| match p.rsplit_once('!') {
                Some((host, port)) if !host.is_empty() && !port.is_empty() => {
                    Ok((host.to_owned(), port.to_owned()))
                }
                _ => Err(format!("{p:?}: want HOST!PORT (* for any)")),
            })
            .collect::<Result<_, _>>()?;
        Ok(Allow { patterns })
    }

    /// True if some pattern admits `addr`.
    pub fn admits(&self, addr: SocketAddr) -> bool {
        let (ip, port) = (addr.ip().to_string(), addr.port().to_string());
        self.patterns
            .iter()
            .any(|(h, p)| (h == "*" || *h == ip) && (p == "*" || *p == port))
    }
}
