//! Directory listings: an HTML page with a table sortable by name, size and
//! time, or JSON for a client that asks for `application/json`.
//!
//! Links are each name percent-encoded as one path segment behind `./`, so
//! a name with `?`, `#`, `%`, `:` or spaces still leads to its file; the
//! text shown is HTML-escaped. Where the directory read carries no
//! attributes (9P2000.L's Treaddir), each entry is walked and stated, many
//! at a time.

use futures::StreamExt;
use http::{HeaderMap, Response, header};
use ninep_client::{DirEntry, Fid, FileInfo};
use ninep_wire::consts::dotl;
use ninep_wire::{Dialect, Name};

use crate::body::{Body, full};
use crate::path::encode_segment;
use crate::status::failed;

/// Entries stated at once when a listing needs their attributes.
const STATS_IN_FLIGHT: usize = 64;

/// One entry of a listing.
#[derive(Debug)]
pub struct Row {
    /// The entry's name.
    pub name: String,
    /// Its attributes; none if it could not be stated.
    pub info: Option<FileInfo>,
}

impl Row {
    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.info.as_ref().is_some_and(FileInfo::is_dir)
    }
}

/// Answers a GET or HEAD of the directory `fid`, whose URL path is `url`
/// (percent-encoded, ending in `/`).
pub async fn directory(headers: &HeaderMap, head: bool, url: &str, fid: &Fid) -> Response<Body> {
    let rows = match rows(fid).await {
        Ok(rows) => rows,
        Err(e) => return failed(&e),
    };
    let (content_type, text) = if wants_json(headers) {
        ("application/json", json(&rows))
    } else {
        ("text/html; charset=utf-8", html(url, &rows))
    };
    let res = Response::builder()
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CACHE_CONTROL, "no-cache")
        .header(header::VARY, "Accept")
        .header(header::CONTENT_LENGTH, text.len());
    let body = if head { full("") } else { full(text) };
    res.body(body).expect("fixed headers make a valid response")
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            t.split(';')
                .next()
                .is_some_and(|t| t.trim() == "application/json")
        })
}

/// The directory's entries with their attributes, directories first, each
/// kind by name.
pub async fn rows(fid: &Fid) -> Result<Vec<Row>, ninep_client::Error> {
    let flags = match fid.client().dialect() {
        Dialect::L => dotl::O_RDONLY | dotl::O_DIRECTORY,
        _ => dotl::O_RDONLY,
    };
    // The walked fid stays unopened, to walk to the entries from.
    let entries = fid.clone_fid().await?.open(flags).await?.read_dir().await?;
    let mut rows: Vec<Row> = futures::stream::iter(entries)
        .map(|DirEntry { name, info, .. }| async move {
            let info = match info {
                Some(info) => Some(info),
                None => stat_entry(fid, &name).await,
            };
            Row { name, info }
        })
        .buffered(STATS_IN_FLIGHT)
        .collect()
        .await;
    rows.sort_by(|a, b| {
        b.is_dir()
            .cmp(&a.is_dir())
            .then_with(|| a.name.cmp(&b.name))
    });
    Ok(rows)
}

/// An entry's attributes; none if it went away or cannot be stated.
async fn stat_entry(dir: &Fid, name: &str) -> Option<FileInfo> {
    let name = Name::new(name).ok()?;
    dir.walk(&[name]).await.ok()?.stat().await.ok()
}

fn json(rows: &[Row]) -> String {
    let list: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| {
            let mut entry = serde_json::json!({
                "name": row.name,
                "type": if row.is_dir() { "dir" } else { "file" },
            });
            if let Some(info) = &row.info {
                entry["size"] = info.size.into();
                entry["mtime"] = info.mtime.into();
            }
            entry
        })
        .collect();
    serde_json::Value::Array(list).to_string()
}

fn html(url: &str, rows: &[Row]) -> String {
    let title = escape(&percent_encoding::percent_decode_str(url).decode_utf8_lossy());
    let mut out = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>Index of {title}</title>{STYLE}</head>\n<body><h1>Index of {title}</h1>\n\
         <table id=\"listing\"><thead><tr>\
         <th data-kind=\"text\">Name</th><th data-kind=\"num\">Size</th>\
         <th data-kind=\"num\">Modified</th></tr></thead>\n<tbody>\n"
    );
    if url != "/" {
        out.push_str("<tr><td><a href=\"../\">../</a></td><td></td><td></td></tr>\n");
    }
    for row in rows {
        let slash = if row.is_dir() { "/" } else { "" };
        let (size, size_text, time, time_text) = match &row.info {
            Some(info) if info.is_dir() => (0, String::new(), info.mtime, date(info.mtime)),
            Some(info) => (
                info.size,
                info.size.to_string(),
                info.mtime,
                date(info.mtime),
            ),
            None => (0, String::new(), 0, String::new()),
        };
        out.push_str(&format!(
            "<tr><td><a href=\"./{link}{slash}\">{name}{slash}</a></td>\
             <td data-v=\"{size}\">{size_text}</td><td data-v=\"{time}\">{time_text}</td></tr>\n",
            link = encode_segment(&row.name),
            name = escape(&row.name),
        ));
    }
    out.push_str("</tbody></table>\n");
    out.push_str(SORT_SCRIPT);
    out.push_str("</body></html>\n");
    out
}

/// A modification time as the listing shows it (UTC).
fn date(secs: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    httpdate::fmt_http_date(t)
}

/// `text` safe to put in HTML text and in quoted attributes.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "<style>body{font-family:sans-serif;margin:1em 2em}\
table{border-collapse:collapse}th{cursor:pointer;text-align:left;border-bottom:1px solid #888}\
td,th{padding:.15em 1.2em .15em 0}td:nth-child(2){text-align:right}</style>";

/// Sorts the table by the column whose header is clicked (again: the other
/// way round); the parent's row stays first.
const SORT_SCRIPT: &str = r#"<script>
document.querySelectorAll('#listing th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var body = document.querySelector('#listing tbody');
    var rows = Array.from(body.rows).filter(function (r) { return r.cells[1].dataset.v !== undefined; });
    var up = th.dataset.dir !== 'up';
    th.dataset.dir = up ? 'up' : 'down';
    var key = function (r) {
      return th.dataset.kind === 'num' ? Number(r.cells[col].dataset.v) : r.cells[col].textContent;
    };
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
</script>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_linked() {
        let rows = [Row {
            name: "<b>&\"x\" 100%?#".into(),
            info: None,
        }];
        let page = html("/d/", &rows);
        assert!(page.contains("href=\"./%3Cb%3E%26%22x%22%20100%25%3F%23\""));
        assert!(page.contains(">&lt;b&gt;&amp;&quot;x&quot; 100%?#</a>"));
        assert!(!page.contains("<b>"));
    }

    #[test]
    fn json_is_asked_for_by_accept() {
        let mut h = HeaderMap::new();
        assert!(!wants_json(&h));
        h.insert(
            header::ACCEPT,
            "text/html, application/json;q=0.9".parse().unwrap(),
        );
        assert!(wants_json(&h));
    }
}
