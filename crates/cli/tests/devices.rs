//! `ninep serve pipe`, `ninep serve net`, and the verbs and `ninep dial`
//! reaching servers through a gateway's /net.

mod common;

use std::process::Stdio;

use bytes::Bytes;
use ninep_client::Client;
use ninep_wire::consts::dotl::O_RDWR;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use common::{NINEP, is_mounted, until};

/// Starts `ninep ARGS...` (a server) on a fresh loopback port; the server
/// (killed when dropped) and the address it says it serves on.
async fn listening(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(NINEP)
        .args(args)
        .args(["--listen", "tcp!127.0.0.1!0"])
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start ninep serve");
    let stderr = child.stderr.take().expect("stderr");
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).await.unwrap();
    let addr = line.trim().rsplit(' ').next().unwrap().to_owned();
    assert!(addr.starts_with("tcp!"), "{line}");
    (child, addr)
}

/// Runs `ninep ARGS...` with `input` on standard input: its standard output.
async fn ninep(args: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = Command::new(NINEP)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start ninep");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success(), "ninep {args:?} failed");
    out.stdout
}

fn port(addr: &str) -> &str {
    addr.rsplit('!').next().unwrap()
}

#[tokio::test]
async fn the_verbs_reach_a_server_through_a_gateway() {
    let (_ramfs, ram) = listening(&["serve", "ramfs"]).await;
    let (_net, gateway) = listening(&["serve", "net", "--dial-allow", "127.0.0.1!*"]).await;
    let through = format!("{gateway}:/tcp!127.0.0.1!{}", port(&ram));
    ninep(
        &["create", "-a", &through, "/motd"],
        b"through the gateway\n",
    )
    .await;
    let shown = ninep(&["cat", "-a", &through, "/motd"], b"").await;
    assert_eq!(shown, b"through the gateway\n");
    let listing = ninep(&["ls", "-a", &through, "/"], b"").await;
    assert!(String::from_utf8_lossy(&listing).contains("motd"));
    // cp names the file ADDR:/PATH, ADDR itself through the gateway.
    let dir = std::env::temp_dir().join(format!("ninep-devices-cp-{}", std::process::id()));
    ninep(
        &["cp", &format!("{through}:/motd"), dir.to_str().unwrap()],
        b"",
    )
    .await;
    assert_eq!(std::fs::read(&dir).unwrap(), b"through the gateway\n");
    std::fs::remove_file(&dir).unwrap();
}

/// A web server on loopback that answers one request with "the page";
/// its port.
async fn one_page_server() -> u16 {
    let web = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = web.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut tcp, _) = web.accept().await.unwrap();
        let mut request = vec![0; 1024];
        let n = tcp.read(&mut request).await.unwrap();
        assert!(request[..n].starts_with(b"GET / HTTP/1.0"));
        tcp.write_all(b"HTTP/1.0 200 OK\r\n\r\nthe page\n")
            .await
            .unwrap();
    });
    port
}

#[tokio::test]
async fn dial_joins_standard_input_and_output_to_a_call() {
    let web_port = one_page_server().await;
    let (_net, gateway) = listening(&["serve", "net"]).await;
    let page = ninep(
        &["dial", &format!("{gateway}:/tcp!localhost!{web_port}")],
        b"GET / HTTP/1.0\r\n\r\n",
    )
    .await;
    assert_eq!(page, b"HTTP/1.0 200 OK\r\n\r\nthe page\n");
}

#[tokio::test]
async fn a_pipe_between_a_client_and_the_command_line() {
    let (_pipe, addr) = listening(&["serve", "pipe"]).await;
    let fsys = Client::connect(&addr)
        .await
        .unwrap()
        .attach("glenda", "")
        .await
        .unwrap();
    let data1 = fsys.open("data1", O_RDWR).await.unwrap();
    ninep(&["write", "-a", &addr, "/data"], b"through the pipe").await;
    assert_eq!(data1.read_at(0, 100).await.unwrap(), "through the pipe");
    assert_eq!(
        data1.read_at(0, 100).await.unwrap(),
        "",
        "the writer closed"
    );
    let e = data1
        .write_at(0, Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("pipe"), "{e}");
}

/// The /net tree through `ninep mount`, driven by the shell: clone held
/// open on a descriptor, connect echoed to ctl, data read with head.
#[tokio::test]
async fn the_shell_makes_a_call_through_a_mounted_net() {
    let web_port = one_page_server().await;
    let (_net, addr) = listening(&["serve", "net"]).await;
    let mnt = std::env::temp_dir().join(format!("ninep-devices-mnt-{}", std::process::id()));
    std::fs::create_dir_all(&mnt).unwrap();
    let mut mount = Command::new(NINEP)
        .args(["mount", "-a", &addr])
        .arg(&mnt)
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    until("the mount", || is_mounted(&mnt)).await;
    let script = format!(
        r#"cd {mnt}/tcp
exec 3<>clone
read -r n <&3
echo "connect 127.0.0.1!{web_port}" > $n/ctl
cat $n/status
exec 4<>$n/data
printf 'GET / HTTP/1.0\r\n\r\n' >&4
cat <&4
echo frob > $n/ctl || cat $n/err
"#,
        mnt = mnt.display()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out,
        "Established qin 0 qout 0\nHTTP/1.0 200 OK\r\n\r\nthe page\nunknown ctl message \"frob\"\n"
    );
    // The shell is gone, and with its descriptors (released by the kernel
    // in its own time) the conversation.
    let tcp = mnt.join("tcp");
    until("the conversation to go", || {
        let left: Vec<_> = std::fs::read_dir(&tcp)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left == ["clone"]
    })
    .await;
    assert!(
        std::process::Command::new("fusermount3")
            .arg("-u")
            .arg(&mnt)
            .status()
            .unwrap()
            .success()
    );
    mount.wait().await.unwrap();
    let _ = std::fs::remove_dir(&mnt);
}

/// A server in a network name space of its own, listening on its loopback
/// where nothing outside can reach it; the gateway beside it serves /net on
/// a unix socket, which crosses name spaces. The verbs and a mux outside
/// reach the server through the gateway only. Needs root (unshare -n); the
/// test says so and passes without it.
#[tokio::test]
async fn a_mux_reaches_a_server_only_the_gateway_can() {
    if !std::process::Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("no network name spaces here (unshare -n): skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("ninep-devices-netns-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("gw.sock");
    // A port free outside, so a direct dial is refused there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Both servers end when the shell is told to (when unshare is killed).
    let script = format!(
        "ip link set lo up
         {NINEP} serve ramfs --listen 'tcp!127.0.0.1!{port}' 2>/dev/null & ram=$!
         {NINEP} serve net --listen 'unix!{}' 2>/dev/null & net=$!
         trap 'kill $ram $net' TERM
         wait",
        sock.display()
    );
    let _inside = Command::new("unshare")
        .args(["-n", "--kill-child=TERM", "sh", "-c", &script])
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    until("the gateway", || sock.exists()).await;
    let direct = format!("tcp!127.0.0.1!{port}");
    let through = format!("unix!{}:/tcp!127.0.0.1!{port}", sock.display());
    let mut made = false;
    for _ in 0..100 {
        // The server inside may still be starting.
        let out = std::process::Command::new(NINEP)
            .args(["create", "-a", &through, "/far"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        if out.status.success() {
            made = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(made, "create through the gateway");
    let refused = std::process::Command::new(NINEP)
        .args(["ls", "-a", &direct, "/"])
        .output()
        .unwrap();
    assert!(
        !refused.status.success(),
        "the server is not reachable directly"
    );

    let ns = dir.join("ns");
    std::fs::write(&ns, format!("mount -c {through} /n/far\n")).unwrap();
    let (_mux, mux) = listening(&["mux", ns.to_str().unwrap()]).await;
    let listing = ninep(&["ls", "-a", &mux, "/n/far"], b"").await;
    assert_eq!(String::from_utf8_lossy(&listing).trim(), "far");
    let _ = std::fs::remove_dir_all(&dir);
}
