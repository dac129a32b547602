//! Who may attach. A server's [`Policy`] says what proves the user an
//! attach names: nothing (the default: every attach is served as whoever
//! it names, and Tauth is answered "authentication not required", as diod
//! does with `-n`), an exchange on an authentication fid run by a Tauth
//! [`Scheme`] (MUNGE, as diod does it), the name in the client certificate
//! of a TLS connection, or the uid of the process at the other end of a
//! unix socket. Several may be allowed at once; an attach that none of
//! them vouches for is refused, and nothing is served to it.
//!
//! The afid flow: Tauth makes an authentication fid for a uname and aname;
//! the client reads and writes it as its scheme says; Tattach names it,
//! and the attach is served only if the exchange proved the user the
//! attach names, with the same uname and aname as the Tauth. An afid
//! serves one attach unless the policy allows more. Flushing a read or
//! write on an afid drops it mid-way, and clunking the afid ends the
//! exchange, whatever it was doing.
//!
//! Whoever is proven, the file server sees the proven user: the attach's
//! uname and n_uname are both those of the user proven (as far as the
//! server's [`Users`] know them), never a name the proof did not cover.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use ninep_transport::Peer;
use ninep_wire::{Errno, NONUNAME, Qid, QidType};

use crate::error::{Error, Result};
use crate::fs::User;

pub mod munge;

/// A boxed future, as the object-safe traits of this module return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who an exchange or a connection proved: a user's name, uid, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proof {
    /// The user's name.
    pub uname: Option<String>,
    /// The user's numeric id.
    pub uid: Option<u32>,
}

/// A Tauth scheme: runs the exchange on an authentication fid.
pub trait Scheme: Send + Sync + 'static {
    /// The scheme's name, as `--auth` gives it.
    fn name(&self) -> &str;

    /// Starts the exchange of a Tauth that names `user` (uname, n_uname,
    /// aname as sent).
    fn start(&self, user: &User) -> Result<Box<dyn Exchange>>;
}

/// One exchange on an authentication fid. Each method may be dropped
/// mid-way (the request was flushed, or the afid clunked); what it started
/// must end with it.
pub trait Exchange: Send {
    /// A Tread of the afid.
    fn read(&mut self, _offset: u64, _count: u32) -> BoxFuture<'_, Result<Bytes>> {
        Box::pin(async { Err(Error::with_errno(Errno::EIO, "nothing to read")) })
    }

    /// A Twrite of the afid; answers how much was taken.
    fn write(&mut self, offset: u64, data: Bytes) -> BoxFuture<'_, Result<u32>>;

    /// Who the exchange proved, asked at the Tattach that names the afid;
    /// an error if it proved no one.
    fn proof(&mut self) -> BoxFuture<'_, Result<Proof>>;
}

/// Names and numeric ids of users, for telling whether a proof of one
/// covers an attach that names the other.
pub trait Users: Send + Sync + 'static {
    /// The uid of the user called `name`.
    fn uid(&self, name: &str) -> Option<u32>;
    /// The name of the user `uid`.
    fn name(&self, uid: u32) -> Option<String>;
}

/// Users known to nobody: a proof covers only the very name or uid it
/// proves.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoUsers;

impl Users for NoUsers {
    fn uid(&self, _name: &str) -> Option<u32> {
        None
    }
    fn name(&self, _uid: u32) -> Option<String> {
        None
    }
}

/// Which user the name in a TLS client certificate is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertNames {
    /// Certificate name to user name; `None` if each name is its user's.
    rules: Option<HashMap<String, String>>,
}

impl CertNames {
    /// The user a certificate names is the one of that name (CN=uname).
    pub fn same() -> CertNames {
        CertNames::default()
    }

    /// Rules, a line each: a certificate's name (which may hold blanks),
    /// then its user's, the last word; `#` starts a comment. A name no
    /// rule has is nobody.
    pub fn parse(text: &str) -> std::result::Result<CertNames, String> {
        let mut rules = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let Some((cert, user)) = line.rsplit_once(char::is_whitespace) else {
                return Err(format!(
                    "line {}: want a certificate name and a user",
                    n + 1
                ));
            };
            rules.insert(cert.trim_end().to_owned(), user.to_owned());
        }
        Ok(CertNames { rules: Some(rules) })
    }

    /// The user the certificate name `name` is.
    fn user<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        match &self.rules {
            None => Some(name),
            Some(rules) => rules.get(name).map(String::as_str),
        }
    }
}

/// Who may attach to a server.
#[derive(Clone)]
pub struct Policy {
    /// Attaches are served as whoever they name.
    open: bool,
    scheme: Option<Arc<dyn Scheme>>,
    tls: Option<CertNames>,
    peercred: bool,
    afid_reuse: bool,
    users: Arc<dyn Users>,
}

impl Default for Policy {
    /// Open: every attach is served as the user it names.
    fn default() -> Self {
        Policy::open()
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("open", &self.open)
            .field("scheme", &self.scheme.as_ref().map(|s| s.name()))
            .field("tls", &self.tls)
            .field("peercred", &self.peercred)
            .field("afid_reuse", &self.afid_reuse)
            .finish()
    }
}

/// The refusal of an attach nothing vouched for.
fn refused(why: impl Into<String>) -> Error {
    Error::with_errno(Errno::EPERM, why.into())
}

impl Policy {
    /// Every attach is served as the user it names; Tauth is answered
    /// "authentication not required".
    pub fn open() -> Policy {
        Policy {
            open: true,
            scheme: None,
            tls: None,
            peercred: false,
            afid_reuse: false,
            users: Arc::new(NoUsers),
        }
    }

    /// Only attaches whose user is proven are served; the `with_` methods
    /// say what proves one. `users` tells names and uids of the same user
    /// apart.
    pub fn required(users: Arc<dyn Users>) -> Policy {
        Policy {
            open: false,
            users,
            ..Policy::open()
        }
    }

    /// An exchange of `scheme` on an afid proves a user.
    pub fn with_scheme(mut self, scheme: Arc<dyn Scheme>) -> Policy {
        self.scheme = Some(scheme);
        self
    }

    /// The name in a TLS client certificate (which the server's client CA
    /// vouched for) proves the user `names` maps it to.
    pub fn with_tls(mut self, names: CertNames) -> Policy {
        self.tls = Some(names);
        self
    }

    /// The uid of a unix-socket peer proves that user; root's proves any
    /// user (root could become any of them to connect).
    pub fn with_peercred(mut self) -> Policy {
        self.peercred = true;
        self
    }

    /// One afid may serve several attaches (of the same uname and aname),
    /// as Plan 9 allows; by default it serves one.
    pub fn with_afid_reuse(mut self) -> Policy {
        self.afid_reuse = true;
        self
    }

    /// True if attaches are served unproven.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// True if an afid may serve more than one attach.
    pub(crate) fn afid_reuse(&self) -> bool {
        self.afid_reuse
    }

    /// Starts the exchange of a Tauth by `user`.
    pub(crate) fn start(&self, user: &User) -> Result<Box<dyn Exchange>> {
        match &self.scheme {
            _ if self.open => Err(Error::with_errno(
                Errno::ENOENT,
                "authentication not required",
            )),
            Some(scheme) => scheme.start(user),
            None => Err(Error::with_errno(
                Errno::EOPNOTSUPP,
                "no Tauth scheme here: the connection itself must prove who you are",
            )),
        }
    }

    /// The user an attach without an afid is served as, if its connection
    /// proves the user it claims (or the policy is open).
    pub(crate) fn by_connection(&self, peer: &Peer, claim: &User) -> Result<User> {
        if self.open {
            return Ok(claim.clone());
        }
        if self.peercred
            && let Some(uid) = peer.uid
        {
            if uid == 0 {
                return Ok(claim.clone());
            }
            let proof = Proof {
                uname: None,
                uid: Some(uid),
            };
            return self.vouch(&proof, claim);
        }
        if let (Some(names), Some(cert)) = (&self.tls, &peer.cert_name) {
            let uname = names
                .user(cert)
                .ok_or_else(|| refused(format!("the certificate of {cert} is nobody's here")))?;
            let proof = Proof {
                uname: Some(uname.to_owned()),
                uid: None,
            };
            return self.vouch(&proof, claim);
        }
        Err(refused(format!(
            "authentication required to attach as {}",
            claim_name(claim)
        )))
    }

    /// The user an attach is served as, given that `proof` is who its
    /// client proved to be; refused unless the proof covers the claim.
    /// The user served carries the proven name and uid, as far as they
    /// are known.
    pub(crate) fn vouch(&self, proof: &Proof, claim: &User) -> Result<User> {
        let uid = proof
            .uid
            .or_else(|| proof.uname.as_deref().and_then(|n| self.users.uid(n)));
        let uname = proof
            .uname
            .clone()
            .or_else(|| uid.and_then(|u| self.users.name(u)));
        let uid_ok = claim.n_uname == NONUNAME || Some(claim.n_uname) == uid;
        let name_ok = if claim.uname.is_empty() {
            claim.n_uname != NONUNAME
        } else {
            uname.as_deref() == Some(claim.uname.as_str())
                || (uid.is_some() && self.users.uid(&claim.uname) == uid)
        };
        if !(uid_ok && name_ok) {
            let proven = match (&uname, uid) {
                (Some(name), _) => name.clone(),
                (None, Some(uid)) => format!("uid {uid}"),
                (None, None) => "nobody".into(),
            };
            return Err(refused(format!(
                "authenticated as {proven}, not as {}",
                claim_name(claim)
            )));
        }
        Ok(User {
            uname: uname.unwrap_or_else(|| claim.uname.clone()),
            n_uname: uid.unwrap_or(claim.n_uname),
            aname: claim.aname.clone(),
        })
    }
}

/// How an attach names its user, for messages.
fn claim_name(claim: &User) -> String {
    match (claim.uname.as_str(), claim.n_uname) {
        (name, NONUNAME) => name.to_owned(),
        ("", uid) => format!("uid {uid}"),
        (name, uid) => format!("{name} (uid {uid})"),
    }
}

/// An authentication fid: the Tauth it was made by and its exchange.
pub(crate) struct AuthFid {
    pub qid: Qid,
    /// The uname, n_uname and aname of the Tauth; an attach must name the
    /// same.
    pub claim: User,
    pub state: tokio::sync::Mutex<AuthState>,
}

pub(crate) struct AuthState {
    exchange: Box<dyn Exchange>,
    /// The user proven, once an attach asked.
    proven: Option<User>,
    /// Attaches served through the afid.
    uses: u32,
}

impl AuthFid {
    pub fn new(path: u64, claim: User, exchange: Box<dyn Exchange>) -> AuthFid {
        AuthFid {
            qid: Qid {
                ty: QidType::AUTH,
                version: 0,
                path,
            },
            claim,
            state: tokio::sync::Mutex::new(AuthState {
                exchange,
                proven: None,
                uses: 0,
            }),
        }
    }

    pub async fn read(&self, offset: u64, count: u32) -> Result<Bytes> {
        self.state.lock().await.exchange.read(offset, count).await
    }

    pub async fn write(&self, offset: u64, data: Bytes) -> Result<u32> {
        self.state.lock().await.exchange.write(offset, data).await
    }

    /// The user an attach by `claim` through this afid is served as.
    pub async fn attach(&self, policy: &Policy, claim: &User) -> Result<User> {
        if self.claim != *claim {
            return Err(refused(
                "the afid was authenticated for another user or tree",
            ));
        }
        let mut state = self.state.lock().await;
        if state.uses > 0 && !policy.afid_reuse() {
            return Err(refused("the afid has served its attach already"));
        }
        let user = match &state.proven {
            Some(user) => user.clone(),
            None => {
                let proof = state.exchange.proof().await?;
                let user = policy.vouch(&proof, claim)?;
                state.proven = Some(user.clone());
                user
            }
        };
        state.uses += 1;
        Ok(user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Passwd;

    impl Users for Passwd {
        fn uid(&self, name: &str) -> Option<u32> {
            match name {
                "root" => Some(0),
                "alice" => Some(1000),
                "bob" => Some(1001),
                _ => None,
            }
        }
        fn name(&self, uid: u32) -> Option<String> {
            ["root", "alice", "bob"]
                .into_iter()
                .find(|n| self.uid(n) == Some(uid))
                .map(str::to_owned)
        }
    }

    fn claim(uname: &str, n_uname: u32) -> User {
        User {
            uname: uname.into(),
            n_uname,
            aname: "/srv".into(),
        }
    }

    fn proof(uname: Option<&str>, uid: Option<u32>) -> Proof {
        Proof {
            uname: uname.map(str::to_owned),
            uid,
        }
    }

    #[test]
    fn a_proof_covers_only_its_own_user() {
        let policy = Policy::required(Arc::new(Passwd));
        let alice = proof(None, Some(1000));
        // By name, by uid, by both, and diod's empty uname with a uid.
        for ok in [
            claim("alice", NONUNAME),
            claim("alice", 1000),
            claim("", 1000),
        ] {
            let served = policy.vouch(&alice, &ok).unwrap();
            assert_eq!((served.uname.as_str(), served.n_uname), ("alice", 1000));
        }
        for bad in [
            claim("bob", NONUNAME),
            claim("alice", 1001),
            claim("bob", 1000),
            claim("", NONUNAME),
            claim("root", 0),
        ] {
            let err = policy.vouch(&alice, &bad).unwrap_err();
            assert_eq!(err.errno(), Errno::EPERM, "{bad:?}");
            assert!(err.ename().contains("authenticated as alice"), "{err:?}");
        }
        // A certificate's name alone: a user no database knows is served
        // by that name, and a uid cannot be claimed beside it.
        let carol = proof(Some("carol"), None);
        let served = policy.vouch(&carol, &claim("carol", NONUNAME)).unwrap();
        assert_eq!((served.uname.as_str(), served.n_uname), ("carol", NONUNAME));
        assert!(policy.vouch(&carol, &claim("carol", 1002)).is_err());
    }

    #[test]
    fn the_connection_proves_only_under_peercred() {
        let peer = |uid| Peer {
            name: "/tmp/s".into(),
            uid,
            cert_name: None,
        };
        let closed = Policy::required(Arc::new(Passwd));
        assert!(
            closed
                .by_connection(&peer(Some(1000)), &claim("alice", NONUNAME))
                .is_err()
        );
        let peercred = closed.with_peercred();
        let served = peercred
            .by_connection(&peer(Some(1000)), &claim("alice", NONUNAME))
            .unwrap();
        assert_eq!(served.n_uname, 1000);
        assert!(
            peercred
                .by_connection(&peer(Some(1000)), &claim("bob", NONUNAME))
                .is_err()
        );
        assert!(
            peercred
                .by_connection(&peer(None), &claim("alice", NONUNAME))
                .is_err()
        );
        // Root vouches for anyone.
        assert!(
            peercred
                .by_connection(&peer(Some(0)), &claim("bob", 1001))
                .is_ok()
        );
        // A certificate's name, as it is or by rules.
        let cert = |name: &str| Peer {
            name: "127.0.0.1:9".into(),
            uid: None,
            cert_name: Some(name.into()),
        };
        let tls = Policy::required(Arc::new(Passwd)).with_tls(CertNames::same());
        assert!(
            tls.by_connection(&cert("alice"), &claim("alice", 1000))
                .is_ok()
        );
        assert!(
            tls.by_connection(&cert("alice"), &claim("bob", NONUNAME))
                .is_err()
        );
        let rules = CertNames::parse("# who is who\nAlice Liddell  alice\n").unwrap();
        let tls = Policy::required(Arc::new(Passwd)).with_tls(rules);
        assert!(
            tls.by_connection(&cert("Alice Liddell"), &claim("alice", NONUNAME))
                .is_ok()
        );
        let err = tls
            .by_connection(&cert("alice"), &claim("alice", NONUNAME))
            .unwrap_err();
        assert_eq!(err.ename(), "the certificate of alice is nobody's here");
        assert!(CertNames::parse("alone").is_err());
        // Open: anyone is whoever they say.
        let open = Policy::open();
        assert_eq!(
            open.by_connection(&peer(None), &claim("bob", 7)).unwrap(),
            claim("bob", 7)
        );
    }
}
