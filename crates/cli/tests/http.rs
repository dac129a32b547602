//! `ninep http` in front of `ninep serve DIR`, ramfs and a mux, checked by
//! independent clients: curl for ranges, conditional requests, HEAD,
//! listings, uploads and a large download; litmus for WebDAV; headless
//! Chromium (where installed) for a listing, a file and a page that
//! fetches JSON.

mod common;

use std::path::PathBuf;
use std::process::Stdio;

use common::{NINEP, noise, serve, serve_ramfs};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("ninep-http-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `ninep http`; killed when dropped.
struct Door {
    _child: Child,
    url: String,
}

/// Starts `ninep http SOURCE ARGS...` on a free loopback port and waits
/// for the line that says where it listens.
async fn door(source: &str, args: &[&str]) -> Door {
    let mut child = Command::new(NINEP)
        .args(["http", source, "--listen", "127.0.0.1:0"])
        .args(args)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start ninep http");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("ninep http said where it listens");
        if let Some(addr) = line.strip_prefix("ninep: serving http on ") {
            break addr.to_owned();
        }
    };
    // Keep draining its messages so that it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Door {
        _child: child,
        url: format!("http://{addr}"),
    }
}

/// What curl got: the last response's status, headers (names lowercase)
/// and body.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Runs `curl -s -i ARGS...`.
async fn curl(args: &[&str]) -> Reply {
    let out = Command::new("curl")
        .args(["-s", "-i", "--path-as-is"])
        .args(args)
        .output()
        .await
        .expect("run curl (Debian package curl)");
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rest = &out.stdout[..];
    loop {
        let end = rest
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("headers end");
        let head = String::from_utf8_lossy(&rest[..end]).into_owned();
        rest = &rest[end + 4..];
        let mut lines = head.lines();
        let status: u16 = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        if status / 100 == 1 {
            continue;
        }
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        return Reply {
            status,
            headers,
            body: rest.to_vec(),
        };
    }
}

/// A served directory with a file of `len` bytes of noise named `name`.
async fn export_with(name: &str, len: usize) -> (Scratch, Child, String, Vec<u8>) {
    let data = noise(len);
    let (scratch, server, addr) = export_made(name, |file| std::fs::write(file, &data)).await;
    (scratch, server, addr, data)
}

/// An export of a tree holding one file, `name`, which `make` makes.
async fn export_made(
    name: &str,
    make: impl FnOnce(&std::path::Path) -> std::io::Result<()>,
) -> (Scratch, Child, String) {
    let scratch = Scratch::new(name);
    let tree = scratch.path("tree");
    std::fs::create_dir(&tree).unwrap();
    make(&tree.join(name)).unwrap();
    let sock = scratch.path("9p.sock");
    let server = serve(&sock, &[tree.to_str().unwrap()]).await;
    (scratch, server, format!("unix!{}", sock.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_conditionals_and_head() {
    let (_scratch, _server, addr, data) = export_with("f.bin", 100_000).await;
    let door = door(&addr, &[]).await;
    let url = format!("{}/f.bin", door.url);

    let whole = curl(&[&url]).await;
    assert_eq!(whole.status, 200);
    assert!(whole.body == data);
    assert_eq!(whole.header("accept-ranges"), Some("bytes"));
    assert_eq!(whole.header("content-length"), Some("100000"));
    assert_eq!(
        whole.header("content-type"),
        Some("application/octet-stream")
    );
    let etag = whole.header("etag").expect("an ETag").to_owned();
    let modified = whole
        .header("last-modified")
        .expect("a Last-Modified")
        .to_owned();
    assert!(etag.starts_with('"') && etag.contains('v'), "{etag}");

    for (range, want, first, last) in [
        ("0-99", &data[..100], 0, 99),
        ("5000-5999", &data[5000..6000], 5000, 5999),
        ("-100", &data[99_900..], 99_900, 99_999),
        ("99000-200000", &data[99_000..], 99_000, 99_999),
    ] {
        let part = curl(&["-r", range, &url]).await;
        assert_eq!(part.status, 206, "{range}");
        assert!(part.body == want, "{range}");
        let content_range = format!("bytes {first}-{last}/100000");
        assert_eq!(part.header("content-range"), Some(content_range.as_str()));
    }
    let past = curl(&["-r", "100000-", &url]).await;
    assert_eq!(past.status, 416);
    assert_eq!(past.header("content-range"), Some("bytes */100000"));

    let head = curl(&["-I", &url]).await;
    assert_eq!(head.status, 200);
    assert_eq!(head.header("content-length"), Some("100000"));
    assert_eq!(head.header("etag"), Some(etag.as_str()));
    assert!(head.body.is_empty());

    let inm = format!("If-None-Match: {etag}");
    let not_modified = curl(&["-H", &inm, &url]).await;
    assert_eq!(not_modified.status, 304);
    assert_eq!(not_modified.header("etag"), Some(etag.as_str()));
    assert!(not_modified.body.is_empty());
    let ims = format!("If-Modified-Since: {modified}");
    assert_eq!(curl(&["-H", &ims, &url]).await.status, 304);
    let old = "If-Modified-Since: Thu, 01 Jan 1970 00:00:01 GMT";
    assert_eq!(curl(&["-H", old, &url]).await.status, 200);
    assert_eq!(curl(&["-H", "If-Match: \"0v1\"", &url]).await.status, 412);
    let im = format!("If-Match: {etag}");
    assert_eq!(curl(&["-H", &im, &url]).await.status, 200);
    assert_eq!(
        curl(&[
            "-H",
            "If-Unmodified-Since: Thu, 01 Jan 1970 00:00:01 GMT",
            &url
        ])
        .await
        .status,
        412
    );
    let if_range = format!("If-Range: {etag}");
    assert_eq!(
        curl(&["-H", &if_range, "-r", "0-0", &url]).await.status,
        206
    );
    assert_eq!(
        curl(&["-H", "If-Range: \"0v1\"", "-r", "0-0", &url])
            .await
            .status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_paths_are_refused() {
    let (scratch, _server, addr, _) = export_with("f", 10).await;
    // A file beside the served tree, which no path may reach.
    std::fs::write(scratch.path("secret"), "no").unwrap();
    let door = door(&addr, &[]).await;
    let long = format!("/{}", "a/".repeat(3000));
    for path in [
        "/../secret",
        "/%2e%2e/secret",
        "/x/..",
        "/a%2fb",
        "/a%00b",
        "/%ff",
        long.as_str(),
    ] {
        let reply = curl(&[&format!("{}{path}", door.url)]).await;
        assert_eq!(reply.status, 400, "{path}");
    }
    assert_eq!(curl(&[&format!("{}/missing", door.url)]).await.status, 404);
    assert_eq!(curl(&[&format!("{}/f/", door.url)]).await.status, 404);
    let big_header = format!("X-Big: {}", "a".repeat(64 << 10));
    assert_eq!(curl(&["-H", &big_header, &door.url]).await.status, 431);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_ten_thousand_entries() {
    let scratch = Scratch::new("many");
    let tree = scratch.path("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..10_000 {
        std::fs::write(tree.join(format!("file {i:05} <&>")), i.to_string()).unwrap();
    }
    std::fs::create_dir(tree.join("sub")).unwrap();
    let sock = scratch.path("9p.sock");
    let _server = serve(&sock, &[tree.to_str().unwrap()]).await;
    let door = door(&format!("unix!{}", sock.display()), &[]).await;

    let json = curl(&["-H", "Accept: application/json", &format!("{}/", door.url)]).await;
    assert_eq!(json.status, 200);
    assert_eq!(json.header("content-type"), Some("application/json"));
    let list: serde_json::Value = serde_json::from_slice(&json.body).unwrap();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 10_001);
    assert_eq!(list[0]["name"], "sub");
    assert_eq!(list[0]["type"], "dir");
    assert_eq!(list[1]["name"], "file 00000 <&>");
    assert_eq!(list[10_000]["size"], 4);

    let html = curl(&[&format!("{}/", door.url)]).await.text();
    assert_eq!(html.matches("<tr><td><a href=").count(), 10_001);
    assert!(html.contains("<a href=\"./file%2009999%20%3C%26%3E\">file 09999 &lt;&amp;&gt;</a>"));
    // Every link leads to its file.
    let linked = curl(&[&format!("{}/file%2009999%20%3C%26%3E", door.url)]).await;
    assert_eq!(linked.text(), "9999");
    assert_eq!(
        curl(&[&format!("{}/sub", door.url)])
            .await
            .header("location"),
        Some("/sub/")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uploads_and_deletes_only_when_writable() {
    let (scratch, _server, addr, _) = export_with("old", 10).await;
    let upload = scratch.path("upload");
    let data = noise(3 << 20);
    std::fs::write(&upload, &data).unwrap();
    let upload = upload.to_str().unwrap();

    let read_only = door(&addr, &[]).await;
    let put = curl(&["-T", upload, &format!("{}/new", read_only.url)]).await;
    assert_eq!(put.status, 405);
    let delete = curl(&["-X", "DELETE", &format!("{}/old", read_only.url)]).await;
    assert_eq!(delete.status, 405);
    assert!(scratch.path("tree/old").exists());

    let door = door(&addr, &["--writable", "--max-body-bytes", "4000000"]).await;
    assert_eq!(
        curl(&["-X", "MKCOL", &format!("{}/dir", door.url)])
            .await
            .status,
        201
    );
    let put = curl(&["-T", upload, &format!("{}/dir/new", door.url)]).await;
    assert_eq!(put.status, 201);
    assert!(std::fs::read(scratch.path("tree/dir/new")).unwrap() == data);
    // Replacing leaves no temporary file behind.
    assert_eq!(
        curl(&["-T", upload, &format!("{}/old", door.url)])
            .await
            .status,
        204
    );
    assert!(std::fs::read(scratch.path("tree/old")).unwrap() == data);
    let names: Vec<_> = std::fs::read_dir(scratch.path("tree"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(curl(&[&format!("{}/dir/new", door.url)]).await.body == data);

    let too_big = scratch.path("too-big");
    std::fs::write(&too_big, noise(5 << 20)).unwrap();
    let put = curl(&[
        "-T",
        too_big.to_str().unwrap(),
        &format!("{}/big", door.url),
    ])
    .await;
    assert_eq!(put.status, 413);
    assert!(!scratch.path("tree/big").exists());

    assert_eq!(
        curl(&["-X", "DELETE", &format!("{}/dir/new", door.url)])
            .await
            .status,
        204
    );
    assert!(!scratch.path("tree/dir/new").exists());
    assert_eq!(
        curl(&["-X", "DELETE", &format!("{}/dir/new", door.url)])
            .await
            .status,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_1_gib_byte_exact() {
    // Made from the kernel's noise, not held in memory: curl's copy is
    // compared with the file itself.
    let noise_file = |file: &std::path::Path| {
        let mut noise = std::io::Read::take(std::fs::File::open("/dev/urandom")?, 1 << 30);
        std::io::copy(&mut noise, &mut std::fs::File::create(file)?).map(drop)
    };
    let (scratch, _server, addr) = export_made("big", noise_file).await;
    let door = door(&addr, &[]).await;
    let out = Command::new("sh")
        .arg("-c")
        .arg("curl -sf \"$1\" | cmp - \"$2\"")
        .args([
            "sh",
            &format!("{}/big", door.url),
            scratch.path("tree/big").to_str().unwrap(),
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_a_mux_with_a_union_at_its_root() {
    let scratch = Scratch::new("mux");
    let (a, b) = (scratch.path("a"), scratch.path("b"));
    std::fs::create_dir_all(a.join("only-a")).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("both"), "from a").unwrap();
    std::fs::write(b.join("both"), "from b").unwrap();
    std::fs::write(b.join("only-b"), noise(1 << 20)).unwrap();
    let (sock_a, sock_b) = (scratch.path("a.sock"), scratch.path("b.sock"));
    let _server_a = serve(&sock_a, &[a.to_str().unwrap()]).await;
    let _server_b = serve(&sock_b, &[b.to_str().unwrap()]).await;
    let ns = scratch.path("ns");
    std::fs::write(
        &ns,
        format!(
            "mount unix!{} /\nmount -a unix!{} /\n",
            sock_a.display(),
            sock_b.display()
        ),
    )
    .unwrap();
    let door = door(ns.to_str().unwrap(), &[]).await;

    let json = curl(&["-H", "Accept: application/json", &format!("{}/", door.url)]).await;
    let list: serde_json::Value = serde_json::from_slice(&json.body).unwrap();
    let names: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["only-a", "both", "only-b"]);
    assert_eq!(
        curl(&[&format!("{}/both", door.url)]).await.text(),
        "from a"
    );
    let part = curl(&["-r", "-10", &format!("{}/only-b", door.url)]).await;
    assert_eq!(part.status, 206);
    assert!(part.body == noise(1 << 20)[(1 << 20) - 10..]);
    assert_eq!(curl(&[&format!("{}/only-a/", door.url)]).await.status, 200);
    assert_eq!(curl(&[&format!("{}/%2e%2e/", door.url)]).await.status, 400);
}

/// Runs litmus's basic, copymove, props and locks groups against the door
/// on `source` and returns its output; every test must pass.
async fn litmus(source: &str, scratch: &Scratch) -> String {
    let door = door(source, &["--writable", "--dav"]).await;
    let out = Command::new("litmus")
        .arg(format!("{}/", door.url))
        // Where it leaves debug.log and child.log.
        .current_dir(&scratch.0)
        .env("TESTS", "basic copymove props locks")
        .output()
        .await
        .expect("run litmus (Debian package litmus)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "litmus failed:\n{text}");
    for group in ["basic", "copymove", "props", "locks"] {
        let summary = text
            .lines()
            .find(|l| l.starts_with(&format!("<- summary for `{group}'")))
            .unwrap_or_else(|| panic!("no summary for {group}:\n{text}"));
        assert!(summary.ends_with(" 0 failed. 100.0%"), "{summary}");
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn litmus_passes_on_ramfs_and_an_export() {
    let scratch = Scratch::new("litmus");
    let sock = scratch.path("ram.sock");
    let _ramfs = serve_ramfs(&sock).await;
    litmus(&format!("unix!{}", sock.display()), &scratch).await;

    let tree = scratch.path("tree");
    std::fs::create_dir(&tree).unwrap();
    let sock = scratch.path("export.sock");
    let _export = serve(&sock, &[tree.to_str().unwrap()]).await;
    litmus(&format!("unix!{}", sock.display()), &scratch).await;
}

/// Headless Chromium, if installed: a listing, a file, and a page whose
/// script fetches the listing as JSON. Skipped where there is no browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_loads_a_listing_a_file_and_json() {
    let Some(chromium) = ["chromium", "chromium-browser"].into_iter().find(|b| {
        std::process::Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        eprintln!("skipped: no chromium");
        return;
    };
    let scratch = Scratch::new("browser");
    let tree = scratch.path("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("hello.txt"), "hello from 9P\n").unwrap();
    std::fs::write(tree.join("a b#c.txt"), "odd name\n").unwrap();
    std::fs::write(
        tree.join("page.html"),
        "<!DOCTYPE html><html><body><p id=out>waiting</p><script>\
         fetch('./', {headers: {Accept: 'application/json'}})\
         .then(r => r.json())\
         .then(l => { document.getElementById('out').textContent = \
           'entries: ' + l.map(e => e.name).sort().join(','); });\
         </script></body></html>",
    )
    .unwrap();
    let sock = scratch.path("9p.sock");
    let _server = serve(&sock, &[tree.to_str().unwrap()]).await;
    let door = door(&format!("unix!{}", sock.display()), &[]).await;

    let browse = |what: &'static str, url: String| {
        let profile = scratch.path(&format!("profile-{what}"));
        let mut cmd = Command::new(chromium);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()));
        (cmd, url)
    };
    let dump = |what: &'static str, url: String| {
        let (mut cmd, url) = browse(what, url);
        async move {
            let out = cmd.arg("--dump-dom").arg(url).output().await.unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
    };

    let listing = dump("listing", format!("{}/", door.url)).await;
    assert!(listing.contains("hello.txt</a>"), "{listing}");
    assert!(listing.contains("href=\"./a%20b%23c.txt\""), "{listing}");
    let file = dump("file", format!("{}/hello.txt", door.url)).await;
    assert!(file.contains("hello from 9P"), "{file}");
    let page = dump("page", format!("{}/page.html", door.url)).await;
    assert!(
        page.contains("entries: a b#c.txt,hello.txt,page.html"),
        "{page}"
    );

    // Kept for a look, in the build's scratch directory rather than /tmp.
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ninep-http-listing.png");
    let (mut cmd, url) = browse("shot", format!("{}/", door.url));
    let out = cmd
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=800,400")
        .arg(url)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success() && shot.exists(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("screenshot of the listing: {}", shot.display());
}
