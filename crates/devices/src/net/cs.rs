//! The connection server: translates dial strings `net!host!service` into
//! the clone file to open and the address to `connect` (Plan 9's cs in
//! ndb(8)). Hosts go through the host's resolver, services through
//! /etc/services; numbers pass through.

use std::net::SocketAddr;

use ninep_server::{Error, Result};
use ninep_wire::Errno;

/// The services database.
const SERVICES: &str = "/etc/services";

/// Plan 9's names that /etc/services lacks.
const PLAN9_SERVICES: [(&str, u16); 1] = [("9fs", 564)];

/// The translations of `dial`, one line each: `/net/tcp/clone 10.0.0.1!80`
/// (`/net/udp/clone` for `udp!`).
pub(crate) async fn translate(dial: &str) -> Result<Vec<String>> {
    let words: Vec<&str> = dial.trim().split('!').collect();
    let [net, host, service] = words[..] else {
        return Err(Error::new(format!(
            "cs: bad dial string {:?}: want net!host!service",
            dial.trim()
        )));
    };
    let proto = match net {
        "tcp" | "net" => "tcp",
        "udp" => "udp",
        _ => {
            return Err(Error::new(format!(
                "cs: no network {net:?} (tcp, udp or net)"
            )));
        }
    };
    let port = port(service, proto).await?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|_| Error::with_errno(Errno::ENOENT, format!("cs: can't translate {host:?}")))?
        .collect();
    Ok(addrs
        .into_iter()
        .map(|a| format!("/net/{proto}/clone {}!{}", a.ip(), a.port()))
        .collect())
}

/// The port of `service`: a number, or a name in the services database.
async fn port(service: &str, proto: &str) -> Result<u16> {
    if let Ok(port) = service.parse() {
        return Ok(port);
    }
    if let Some((_, port)) = PLAN9_SERVICES.iter().find(|(name, _)| *name == service) {
        return Ok(*port);
    }
    let unknown = || Error::with_errno(Errno::ENOENT, format!("cs: unknown service {service:?}"));
    let services = tokio::fs::read_to_string(SERVICES)
        .await
        .map_err(|_| unknown())?;
    services
        .lines()
        .filter_map(|line| {
            let mut words = line.split('#').next()?.split_whitespace();
            let name = words.next()?;
            let (port, p) = words.next()?.split_once('/')?;
            let known = p == proto && (name == service || words.any(|alias| alias == service));
            known.then(|| port.parse().ok()).flatten()
        })
        .next()
        .ok_or_else(unknown)
}
