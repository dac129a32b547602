//! Who may attach: the afid flow of Tauth and Tattach under a policy that
//! asks for proof, as transcripts in each dialect, with a scheme of the
//! tests' own ("password"): the client writes `name:secret` to the afid,
//! and may read back `ok` once the secret was right.

mod transcript;

use std::sync::Arc;

use bytes::Bytes;
use ninep_server::auth::{BoxFuture, Exchange, Proof, Scheme, Users};
use ninep_server::tree::{Dir, Tree};
use ninep_server::{Error, Policy, Result, Server, StreamLimits, User};
use ninep_wire::Errno;
use transcript::{limits, play_server};

/// Users and their secrets; `block` is a user whose read never answers.
const SECRETS: [(&str, u32, &str); 3] = [
    ("alice", 1000, "wonderland"),
    ("bob", 1001, "builder"),
    ("block", 1002, "-"),
];

struct Passwd;

impl Users for Passwd {
    fn uid(&self, name: &str) -> Option<u32> {
        SECRETS.iter().find(|u| u.0 == name).map(|u| u.1)
    }
    fn name(&self, uid: u32) -> Option<String> {
        SECRETS.iter().find(|u| u.1 == uid).map(|u| u.0.to_owned())
    }
}

struct Password;

impl Scheme for Password {
    fn name(&self) -> &str {
        "password"
    }
    fn start(&self, _user: &User) -> Result<Box<dyn Exchange>> {
        Ok(Box::new(Said(Vec::new())))
    }
}

/// What the client wrote so far.
struct Said(Vec<u8>);

impl Said {
    fn proven(&self) -> Option<&'static str> {
        let text = std::str::from_utf8(&self.0).ok()?;
        let (name, secret) = text.split_once(':')?;
        SECRETS
            .iter()
            .find(|u| u.0 == name && u.2 == secret)
            .map(|u| u.0)
    }
}

impl Exchange for Said {
    fn read(&mut self, _offset: u64, _count: u32) -> BoxFuture<'_, Result<Bytes>> {
        Box::pin(async move {
            if self.0.starts_with(b"block:") {
                std::future::pending::<()>().await;
            }
            match self.proven() {
                Some(_) => Ok(Bytes::from_static(b"ok")),
                None => Err(Error::with_errno(Errno::EPERM, "not yet")),
            }
        })
    }
    fn write(&mut self, offset: u64, data: Bytes) -> BoxFuture<'_, Result<u32>> {
        Box::pin(async move {
            if offset != self.0.len() as u64 {
                return Err(Error::with_errno(Errno::EIO, "out of order"));
            }
            self.0.extend_from_slice(&data);
            Ok(data.len() as u32)
        })
    }
    fn proof(&mut self) -> BoxFuture<'_, Result<Proof>> {
        Box::pin(async move {
            let name = self
                .proven()
                .ok_or_else(|| Error::with_errno(Errno::EPERM, "wrong password"))?;
            Ok(Proof {
                uname: Some(name.to_owned()),
                uid: None,
            })
        })
    }
}

fn server(policy: Policy) -> Server<Tree> {
    let root = Dir::new().read("whoami", |cx| {
        Ok(format!("{} {}", cx.user.uname, cx.user.n_uname))
    });
    Server::with_policy(Tree::new(root), limits(), StreamLimits::default(), policy)
}

fn required() -> Policy {
    Policy::required(Arc::new(Passwd)).with_scheme(Arc::new(Password))
}

#[tokio::test]
async fn an_attach_is_served_once_its_afid_proves_the_user() {
    let script = "
        -> Tversion tag 65535 msize 8192 version '9P2000'
        <- Rversion tag 65535 msize 8192 version '9P2000'
        # nothing proven: refused
        -> Tattach tag 1 fid 0 afid -1 uname alice aname
        <- Rerror tag 1 ename authentication required to attach as alice
        -> Tauth tag 1 afid 7 uname alice aname
        <- Rauth tag 1 qid (0000000000000000 0 A)
        # the afid's number is taken, for files too
        -> Tauth tag 1 afid 7 uname alice aname
        <- Rerror tag 1 ename fid in use
        # an exchange not yet done proves nothing
        -> Tattach tag 2 fid 0 afid 7 uname alice aname
        <- Rerror tag 2 ename wrong password
        -> Twrite tag 3 fid 7 offset 0 count 6 'alice:'
        <- Rwrite tag 3 count 6
        -> Tread tag 3 fid 7 offset 0 count 10
        <- Rerror tag 3 ename not yet
        -> Twrite tag 3 fid 7 offset 6 count 10 'wonderland'
        <- Rwrite tag 3 count 10
        -> Tread tag 3 fid 7 offset 0 count 10
        <- Rread tag 3 count 2 'ok'
        # an afid is not a file
        -> Twalk tag 4 fid 7 newfid 1 nwname 0
        <- Rerror tag 4 ename unknown fid
        -> Tstat tag 4 fid 7
        <- Rerror tag 4 ename Tstat of an authentication fid
        # only the user and tree of the Tauth
        -> Tattach tag 5 fid 0 afid 7 uname bob aname
        <- Rerror tag 5 ename the afid was authenticated for another user or tree
        -> Tattach tag 5 fid 0 afid 7 uname alice aname other
        <- Rerror tag 5 ename the afid was authenticated for another user or tree
        -> Tattach tag 5 fid 0 afid 3 uname alice aname
        <- Rerror tag 5 ename unknown afid
        -> Tattach tag 6 fid 0 afid 7 uname alice aname
        <- Rattach tag 6 qid (0000000000000000 0 d)
        # a file fid is no afid
        -> Tattach tag 6 fid 1 afid 0 uname alice aname
        <- Rerror tag 6 ename afid is not an authentication fid
        # once per afid
        -> Tattach tag 7 fid 1 afid 7 uname alice aname
        <- Rerror tag 7 ename the afid has served its attach already
        -> Tclunk tag 8 fid 7
        <- Rclunk tag 8
        -> Tattach tag 9 fid 1 afid 7 uname alice aname
        <- Rerror tag 9 ename unknown afid
        # the file server sees the user proven, with the uid the server knows
        -> Twalk tag 10 fid 0 newfid 2 nwname 1 0:whoami
        <- Rwalk tag 10 nwqid 1 0:(*)
        -> Topen tag 11 fid 2 mode 0
        <- Ropen tag 11 qid (*) iounit 8168
        -> Tread tag 12 fid 2 offset 0 count 100
        <- Rread tag 12 count 10 'alice 1000'
    ";
    play_server(server(required()), script).await;
}

#[tokio::test]
async fn a_wrong_secret_or_another_users_proof_is_refused() {
    let script = "
        -> Tversion tag 65535 msize 8192 version '9P2000.u'
        <- Rversion tag 65535 msize 8192 version '9P2000.u'
        # garbage in the exchange
        -> Tauth tag 1 afid 1 uname alice aname '' n_uname 1000
        <- Rauth tag 1 qid (0000000000000000 0 A)
        -> Twrite tag 2 fid 1 offset 0 count 9 'alice:bad'
        <- Rwrite tag 2 count 9
        -> Twrite tag 2 fid 1 offset 0 count 1 'x'
        <- Rerror tag 2 ename out of order errno 5
        -> Tattach tag 3 fid 0 afid 1 uname alice aname '' n_uname 1000
        <- Rerror tag 3 ename wrong password errno 1
        # bob's secret, in an afid for alice
        -> Tauth tag 4 afid 2 uname alice aname '' n_uname 1000
        <- Rauth tag 4 qid (0000000000000001 0 A)
        -> Twrite tag 5 fid 2 offset 0 count 11 'bob:builder'
        <- Rwrite tag 5 count 11
        -> Tattach tag 6 fid 0 afid 2 uname alice aname '' n_uname 1000
        <- Rerror tag 6 ename authenticated as bob, not as alice (uid 1000) errno 1
        # the afid cannot be removed, but goes all the same
        -> Tremove tag 7 fid 2
        <- Rerror tag 7 ename an authentication fid cannot be removed errno 1
        -> Tclunk tag 7 fid 2
        <- Rerror tag 7 ename unknown fid errno 9
        # a uid claimed beside a proven name must be that name's
        -> Tauth tag 8 afid 3 uname bob aname '' n_uname 0
        <- Rauth tag 8 qid (0000000000000002 0 A)
        -> Twrite tag 9 fid 3 offset 0 count 11 'bob:builder'
        <- Rwrite tag 9 count 11
        -> Tattach tag 10 fid 0 afid 3 uname bob aname '' n_uname 0
        <- Rerror tag 10 ename authenticated as bob, not as bob (uid 0) errno 1
    ";
    play_server(server(required()), script).await;
}

#[tokio::test]
async fn flush_and_clunk_end_an_exchange_cleanly() {
    let script = "
        -> Tversion tag 65535 msize 8192 version '9P2000.L'
        <- Rversion tag 65535 msize 8192 version '9P2000.L'
        -> Tauth tag 1 afid 1 uname block aname '' n_uname 1002
        <- Rauth tag 1 qid (0000000000000000 0 A)
        -> Twrite tag 2 fid 1 offset 0 count 6 'block:'
        <- Rwrite tag 2 count 6
        # a read that never answers, flushed
        -> Tread tag 3 fid 1 offset 0 count 10
        <- none
        -> Tflush tag 4 oldtag 3
        <- Rflush tag 4
        # another, and the afid clunked under it: the clunk waits for nothing
        -> Tread tag 5 fid 1 offset 0 count 10
        <- none
        -> Tclunk tag 6 fid 1
        <- Rclunk tag 6
        -> Tflush tag 7 oldtag 5
        <- Rflush tag 7
        # the number is free again, and the server goes on serving
        # diod's way: no uname, a uid
        -> Tauth tag 8 afid 1 uname '' aname '' n_uname 1000
        <- Rauth tag 8 qid (0000000000000001 0 A)
        -> Twrite tag 9 fid 1 offset 0 count 16 'alice:wonderland'
        <- Rwrite tag 9 count 16
        -> Tattach tag 10 fid 0 afid 1 uname '' aname '' n_uname 1000
        <- Rattach tag 10 qid (0000000000000000 0 d)
        -> Tattach tag 11 fid 2 afid 1 uname '' aname '' n_uname 1000
        <- Rlerror tag 11 ecode 1
    ";
    play_server(server(required()), script).await;
}

#[tokio::test]
async fn an_afid_may_serve_several_attaches_if_the_policy_says_so() {
    let script = "
        -> Tversion tag 65535 msize 8192 version '9P2000'
        <- Rversion tag 65535 msize 8192 version '9P2000'
        -> Tauth tag 1 afid 1 uname bob aname
        <- Rauth tag 1 qid (0000000000000000 0 A)
        -> Twrite tag 2 fid 1 offset 0 count 11 'bob:builder'
        <- Rwrite tag 2 count 11
        -> Tattach tag 3 fid 0 afid 1 uname bob aname
        <- Rattach tag 3 qid (0000000000000000 0 d)
        -> Tattach tag 4 fid 2 afid 1 uname bob aname
        <- Rattach tag 4 qid (0000000000000000 0 d)
    ";
    play_server(server(required().with_afid_reuse()), script).await;
}

#[tokio::test]
async fn without_a_tauth_scheme_tauth_says_what_proves_a_user() {
    let script = "
        -> Tversion tag 65535 msize 8192 version '9P2000'
        <- Rversion tag 65535 msize 8192 version '9P2000'
        -> Tauth tag 1 afid 1 uname bob aname
        <- Rerror tag 1 ename no Tauth scheme here: the connection itself must prove who you are
        -> Tattach tag 2 fid 0 afid -1 uname bob aname
        <- Rerror tag 2 ename authentication required to attach as bob
        -> Tattach tag 2 fid 0 afid 1 uname bob aname
        <- Rerror tag 2 ename unknown afid
    ";
    let policy = Policy::required(Arc::new(Passwd)).with_peercred();
    play_server(server(policy), script).await;
}
