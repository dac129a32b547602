//! The soak's own clients, run by `scripts/soak` against servers it started
//! (an export, and a mux in front of it); not a test by itself, hence
//! ignored. Each client works in a directory of its own: it creates,
//! writes, reads back, renames, removes and lists files, abandons requests
//! (the client flushes them) and now and then hangs up and dials again.
//! Every write it saw acknowledged it keeps; at the end it writes the
//! expected content of each of its files to a manifest, one line each:
//! `DIR/NAME SIZE FNV1A64`, which the script checks against the disk.
//!
//! Environment: SOAK_ADDRS (dial strings, comma separated; client i uses
//! address i modulo their number), SOAK_CLIENTS, SOAK_SECONDS,
//! SOAK_MANIFEST (the file to write), SOAK_PREFIX (of the directories).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ninep_client::{Client, Fsys};
use ninep_wire::consts::dotl::{O_RDONLY, O_RDWR};

/// Files one client keeps at most, and their largest size.
const FILES: usize = 8;
const MAX_SIZE: usize = 96 * 1024;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// FNV-1a, 64 bits: simple enough for the script to compute too.
fn fnv1a(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// xorshift64: a cheap, seeded source of choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let seed = self.next();
        (0..len)
            .map(|i| (seed >> (i % 8 * 8)) as u8 ^ i as u8)
            .collect()
    }
}

/// One client's files as its acknowledged writes left them.
struct Soaker {
    dir: String,
    files: BTreeMap<String, Vec<u8>>,
    rng: Rng,
    next_name: u64,
    ops: u64,
}

async fn dial(addr: &str, dir: &str) -> Fsys {
    let fsys = Client::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{addr}: {e}"))
        .attach_as("root", 0, "")
        .await
        .unwrap();
    // The directory exists already after a redial.
    let _ = fsys.mkdir(dir, 0o755).await;
    fsys
}

impl Soaker {
    fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.dir)
    }

    fn pick_file(&mut self) -> Option<String> {
        let n = self.files.len();
        (n > 0).then(|| self.files.keys().nth(self.rng.below(n)).cloned())?
    }

    async fn step(&mut self, fsys: &Fsys) {
        self.ops += 1;
        match self.rng.below(10) {
            0 | 1 if self.files.len() < FILES => {
                let name = format!("f{}", self.next_name);
                self.next_name += 1;
                let len = self.rng.below(MAX_SIZE);
                let data = self.rng.bytes(len);
                let file = fsys.create(&self.path(&name), 0o644, O_RDWR).await.unwrap();
                file.write_all_at(0, Bytes::from(data.clone()))
                    .await
                    .unwrap();
                file.close().await.unwrap();
                self.files.insert(name, data);
            }
            2 | 3 => {
                let Some(name) = self.pick_file() else { return };
                let len = self.rng.below(16 * 1024) + 1;
                let data = self.rng.bytes(len);
                let offset = self.rng.below(self.files[&name].len() + 1);
                let file = fsys.open(&self.path(&name), O_RDWR).await.unwrap();
                file.write_all_at(offset as u64, Bytes::from(data.clone()))
                    .await
                    .unwrap();
                file.close().await.unwrap();
                let content = self.files.get_mut(&name).expect("picked");
                if content.len() < offset + len {
                    content.resize(offset + len, 0);
                }
                content[offset..offset + len].copy_from_slice(&data);
            }
            4 | 5 => {
                let Some(name) = self.pick_file() else { return };
                let got = fsys.read(&self.path(&name)).await.unwrap();
                assert!(
                    got == self.files[&name],
                    "{}/{name} reads back wrong",
                    self.dir
                );
            }
            6 => {
                let Some(name) = self.pick_file() else { return };
                let to = format!("f{}", self.next_name);
                self.next_name += 1;
                fsys.rename(&self.path(&name), &to).await.unwrap();
                let content = self.files.remove(&name).expect("picked");
                self.files.insert(to, content);
            }
            7 => {
                let Some(name) = self.pick_file() else { return };
                fsys.remove(&self.path(&name)).await.unwrap();
                self.files.remove(&name);
            }
            8 => {
                let mut names: Vec<_> = fsys
                    .read_dir(&self.dir)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|e| e.name)
                    .filter(|n| n != "." && n != "..")
                    .collect();
                names.sort();
                let want: Vec<_> = self.files.keys().cloned().collect();
                assert_eq!(names, want, "{} lists wrong", self.dir);
            }
            _ => {
                // A read abandoned in flight: the client flushes it.
                let Some(name) = self.pick_file() else { return };
                let path = self.path(&name);
                let read = fsys.read(&path);
                let _ = tokio::time::timeout(Duration::from_micros(50), read).await;
                let file = fsys.open(&path, O_RDONLY).await.unwrap();
                drop(file);
            }
        }
    }
}

async fn soak(addr: String, dir: String, seed: u64, until: Instant) -> Soaker {
    let mut s = Soaker {
        dir,
        files: BTreeMap::new(),
        rng: Rng(seed | 1),
        next_name: 0,
        ops: 0,
    };
    let mut fsys = dial(&addr, &s.dir).await;
    while Instant::now() < until {
        // Hang up now and then: the server clunks what was left.
        if s.rng.below(200) == 0 {
            drop(fsys);
            fsys = dial(&addr, &s.dir).await;
        }
        s.step(&fsys).await;
    }
    fsys.close().await;
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "run by scripts/soak against servers it starts"]
async fn soak_clients() {
    let addrs: Vec<String> = env("SOAK_ADDRS").split(',').map(str::to_owned).collect();
    let clients: usize = env("SOAK_CLIENTS").parse().unwrap();
    let seconds: u64 = env("SOAK_SECONDS").parse().unwrap();
    let prefix = env("SOAK_PREFIX");
    let until = Instant::now() + Duration::from_secs(seconds);
    let runs: Vec<_> = (0..clients)
        .map(|i| {
            let addr = addrs[i % addrs.len()].clone();
            let dir = format!("{prefix}{i}");
            tokio::spawn(soak(addr, dir, 0x9e37_79b9 * (i as u64 + 1), until))
        })
        .collect();
    let mut manifest = String::new();
    let mut ops = 0;
    for run in runs {
        let s = run.await.unwrap();
        ops += s.ops;
        for (name, content) in &s.files {
            let line = format!(
                "{}/{name} {} {:016x}\n",
                s.dir,
                content.len(),
                fnv1a(content)
            );
            manifest.push_str(&line);
        }
    }
    std::fs::write(env("SOAK_MANIFEST"), manifest).unwrap();
    println!("soak: {clients} clients, {ops} operations");
}
