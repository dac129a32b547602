//! The ssh pipe from the command line (the u9fs way): `exec!ssh ...` and
//! `ssh!host!DIR` run `ninep serve --stdio DIR` on the far side of an sshd
//! the test starts on a free loopback port, with keys made for it, and
//! stops by PID. Run as root (sshd). A mux's mount lines and `ninep
//! mount` use the pipe too.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

use common::{Background, NINEP};

/// An sshd of our own and everything it needs, in a fresh directory.
struct Sshd {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn keygen(path: &Path) {
    let made = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success());
}

impl Sshd {
    /// Starts one, in a directory named after `tag`.
    fn start(tag: &str) -> Sshd {
        let dir = std::env::temp_dir().join(format!("ninep-sshd-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("export")).unwrap();
        std::fs::write(dir.join("export/motd"), "over ssh\n").unwrap();
        keygen(&dir.join("host_key"));
        keygen(&dir.join("client_key"));
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // The far side finds `ninep` where the tests built it.
        let bin = Path::new(NINEP).parent().unwrap().display().to_string();
        let config = format!(
            "ListenAddress 127.0.0.1\nPort {port}\nHostKey {d}/host_key\n\
             AuthorizedKeysFile {d}/authorized_keys\nPidFile none\n\
             PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n\
             SetEnv PATH={bin}:/usr/bin:/bin\n",
            d = dir.display()
        );
        std::fs::write(dir.join("sshd_config"), config).unwrap();
        std::fs::create_dir_all("/run/sshd").unwrap();
        let child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stderr(std::fs::File::create(dir.join("sshd.log")).unwrap())
            .spawn()
            .expect("sshd (openssh-server)");
        let sshd = Sshd { child, dir, port };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return sshd;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("sshd did not listen");
    }

    /// The ssh options that reach this sshd with the client key.
    fn options(&self) -> String {
        format!(
            "-F /dev/null -p {} -i {}/client_key -o IdentitiesOnly=yes \
             -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
             -o BatchMode=yes -o LogLevel=ERROR",
            self.port,
            self.dir.display()
        )
    }

    fn export(&self) -> String {
        self.dir.join("export").display().to_string()
    }

    /// A PATH whose `ssh` adds the options, for `ssh!host!DIR` addresses.
    fn path_with_ssh(&self) -> String {
        let wrapper = self.dir.join("bin");
        std::fs::create_dir_all(&wrapper).unwrap();
        std::fs::write(
            wrapper.join("ssh"),
            format!("#!/bin/sh\nexec /usr/bin/ssh {} \"$@\"\n", self.options()),
        )
        .unwrap();
        std::fs::set_permissions(
            wrapper.join("ssh"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        format!("{}:/usr/bin:/bin", wrapper.display())
    }
}

fn ninep(args: &[&str], path: Option<&str>) -> Output {
    let mut command = Command::new(NINEP);
    command.args(args);
    if let Some(path) = path {
        command.env("PATH", path);
    }
    command.output().unwrap()
}

#[test]
fn ls_cat_and_cp_run_over_an_ssh_pipe() {
    let sshd = Sshd::start("verbs");
    let addr = format!(
        "exec!ssh {} root@127.0.0.1 ninep serve --stdio {}",
        sshd.options(),
        sshd.export()
    );
    let ls = ninep(&["ls", "-a", &addr], None);
    assert_eq!(String::from_utf8_lossy(&ls.stdout).trim(), "motd", "{ls:?}");
    let copy = sshd.dir.join("copy");
    let cp = ninep(
        &["cp", &format!("{addr}:/motd"), copy.to_str().unwrap()],
        None,
    );
    assert!(cp.status.success(), "{cp:?}");
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), "over ssh\n");

    // ssh!host!DIR, through an `ssh` on our PATH that adds the options.
    let path = sshd.path_with_ssh();
    let short = format!("ssh!root@127.0.0.1!{}", sshd.export());
    let cat = ninep(&["cat", "-a", &short, "motd"], Some(&path));
    assert_eq!(cat.stdout, b"over ssh\n", "{cat:?}");
}

/// A mux mounts a tree reached over ssh (`ssh!host!DIR` in a mount line),
/// and `ninep mount` mounts one over `exec!ssh ...`.
#[test]
fn a_mux_and_a_mount_reach_a_tree_over_an_ssh_pipe() {
    let sshd = Sshd::start("mux");
    let nsfile = sshd.dir.join("ns");
    let line = format!("mount ssh!root@127.0.0.1!{} /n\n", sshd.export());
    std::fs::write(&nsfile, line).unwrap();
    // Port 0: the mux says where it listens, on the first line of its
    // standard error (a port probed free could be taken meanwhile).
    let mut mux = Command::new(NINEP)
        .args([
            "mux",
            nsfile.to_str().unwrap(),
            "--listen",
            "tcp!127.0.0.1!0",
        ])
        .env("PATH", sshd.path_with_ssh())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(mux.stderr.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut first).unwrap();
    // The rest of what it says goes to ours.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::stderr()));
    let listen = first
        .trim()
        .rsplit(" on ")
        .next()
        .filter(|a| a.starts_with("tcp!"))
        .map(str::to_owned);
    let cat = listen
        .as_deref()
        .map(|listen| ninep(&["cat", "-a", listen, "n/motd"], None));
    let _ = mux.kill();
    let _ = mux.wait();
    let cat = cat.unwrap_or_else(|| panic!("the mux did not listen: {first:?}"));
    assert_eq!(cat.stdout, b"over ssh\n", "{cat:?}");

    let addr = format!(
        "exec!ssh {} root@127.0.0.1 ninep serve --stdio {}",
        sshd.options(),
        sshd.export()
    );
    let mount = Background::mount(&addr, &sshd.dir.join("mnt"), &[]);
    assert_eq!(
        std::fs::read_to_string(mount.mnt.join("motd")).unwrap(),
        "over ssh\n"
    );
    std::fs::write(mount.mnt.join("written"), "through the mount\n").unwrap();
    drop(mount);
    assert_eq!(
        std::fs::read_to_string(sshd.dir.join("export/written")).unwrap(),
        "through the mount\n"
    );
}
