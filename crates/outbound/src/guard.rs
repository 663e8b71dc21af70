//! The SSRF guard: integrations may not reach the server's own network.
//! The resolver drops local addresses, so the check applies to what is
//! actually connected to — redirects and DNS names that point inside the
//! network included; literal IP hosts are checked by the client.

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Raised by the resolver when every address of a host is local; found
/// again in reqwest's error chain to report the refusal clearly.
#[derive(Debug)]
pub(crate) struct LocalNetworkRefused;

impl fmt::Display for LocalNetworkRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the address is on a local network")
    }
}

impl StdError for LocalNetworkRefused {}

/// Whether `error` (or one of its sources) is the guard's refusal: the
/// target's host resolved only to local addresses. For callers that send
/// through [`crate::HttpClient::client_for`]'s client and shape their own
/// errors (an upstream MCP server's transport); [`crate::HttpClient::send`]
/// shapes the refusal itself, as [`crate::HttpFailure::local_network`].
pub fn is_local_network_refusal(error: &(dyn StdError + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(e) = current {
        if e.is::<LocalNetworkRefused>() {
            return true;
        }
        current = e.source();
    }
    false
}

/// Resolves through the system and drops local addresses, so the check
/// applies to what is actually connected to (including redirects and
/// DNS names that point inside the network).
pub(crate) struct GuardedResolver {
    pub(crate) allow_local_network: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        let allow_local = self.allow_local_network;
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|addr| allow_local || !is_local(addr.ip()))
                .collect();
            if allowed.is_empty() && !found.is_empty() {
                return Err(Box::new(LocalNetworkRefused) as Box<dyn StdError + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether an address is loopback, private, link-local, CGNAT, reserved,
/// unspecified, multicast or broadcast, including IPv6 forms embedding one.
pub fn is_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_local_v4(v4),
        IpAddr::V6(v6) => is_local_v6(v6),
    }
}

fn is_local_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        // 0.0.0.0/8 "this network", 100.64.0.0/10 CGNAT, 240.0.0.0/4 reserved.
        || a == 0
        || (a == 100 && (b & 0xc0) == 64)
        || a >= 240
}

fn is_local_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let first = segments[0];
    if ip.is_loopback() || ip.is_unspecified() || ip.is_multicast() {
        return true;
    }
    // fe80::/10 link-local, fec0::/10 site-local (deprecated), fc00::/7 ULA.
    if (first & 0xffc0) == 0xfe80 || (first & 0xffc0) == 0xfec0 || (first & 0xfe00) == 0xfc00 {
        return true;
    }
    embedded_v4(ip).is_some_and(is_local_v4)
}

/// The IPv4 address inside IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::/96`) and 6to4 (`2002::/16`) addresses.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return Some(mapped);
    }
    if s[..6] == [0; 6] || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]) {
        return Some(tail);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_address_classification() {
        let local = [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12::1",
            "ff02::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:c0a8:0101::1",
        ];
        for ip in local {
            assert!(is_local(ip.parse().unwrap()), "{ip}");
        }
        let public = [
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ];
        for ip in public {
            assert!(!is_local(ip.parse().unwrap()), "{ip}");
        }
    }
}
