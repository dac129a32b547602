//! Plan 9's namespace-file syntax, shared by `ninep ns` and the mux: one
//! `mount`, `bind` or `unmount` per line, `#` to the end of a line a comment.
//!
//! ```text
//! mount [-abc] ADDR OLD [ANAME]   # a 9P server's tree at OLD
//! bind [-abc] NEW OLD             # NEW also at OLD
//! unmount [NEW] OLD               # undo the mounts and binds at OLD (of NEW)
//! ```
//!
//! `-b` and `-a` put the new tree before or after what OLD already holds,
//! making a union directory; with neither it replaces OLD; `-c` lets files be
//! created in it.

use std::fmt;

/// How a mount or bind joins what is already at OLD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flags {
    /// `-b`: in front of OLD's members.
    pub before: bool,
    /// `-a`: behind OLD's members.
    pub after: bool,
    /// `-c`: creates may go here.
    pub create: bool,
}

impl Flags {
    /// True if the new tree joins a union instead of replacing OLD.
    pub fn is_union(self) -> bool {
        self.before || self.after
    }
}

impl fmt::Display for Flags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Flags::default() {
            return Ok(());
        }
        f.write_str("-")?;
        for (set, c) in [(self.after, 'a'), (self.before, 'b'), (self.create, 'c')] {
            if set {
                write!(f, "{c}")?;
            }
        }
        f.write_str(" ")
    }
}

/// One line of a namespace file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// `mount [-abc] ADDR OLD [ANAME]`.
    Mount {
        /// How the tree joins what is at OLD.
        flags: Flags,
        /// The server's dial string (`tcp!host!564`, `unix!/path`).
        addr: String,
        /// Where the tree goes.
        old: String,
        /// The tree of the server to attach to; empty for its default.
        aname: String,
    },
    /// `bind [-abc] NEW OLD`.
    Bind {
        /// How NEW joins what is at OLD.
        flags: Flags,
        /// The file or directory to put at OLD, as the name space has it.
        new: String,
        /// Where it goes.
        old: String,
    },
    /// `unmount [NEW] OLD`.
    Unmount {
        /// The mount's address or the bind's NEW to undo; all at OLD if none.
        new: Option<String>,
        /// Where they were put.
        old: String,
    },
}

impl Entry {
    /// The path the entry changes.
    pub fn old(&self) -> &str {
        match self {
            Entry::Mount { old, .. } | Entry::Bind { old, .. } | Entry::Unmount { old, .. } => old,
        }
    }
}

impl fmt::Display for Entry {
    /// The entry as a namespace-file line (without a newline).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Mount {
                flags,
                addr,
                old,
                aname,
            } => {
                write!(f, "mount {flags}{addr} {old}")?;
                if !aname.is_empty() {
                    write!(f, " {aname}")?;
                }
                Ok(())
            }
            Entry::Bind { flags, new, old } => write!(f, "bind {flags}{new} {old}"),
            Entry::Unmount {
                new: Some(new),
                old,
            } => write!(f, "unmount {new} {old}"),
            Entry::Unmount { new: None, old } => write!(f, "unmount {old}"),
        }
    }
}

/// A line that is not a namespace-file entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based.
    pub line: usize,
    /// What is wrong with it.
    pub what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for ParseError {}

/// Parses a namespace file.
pub fn parse(text: &str) -> Result<Vec<Entry>, ParseError> {
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let err = |what: String| ParseError { line: n + 1, what };
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_whitespace().peekable();
        let Some(verb) = words.next() else {
            continue;
        };
        let mut flags = Flags::default();
        while let Some(w) = words.next_if(|w| w.starts_with('-') && w.len() > 1) {
            for c in w[1..].chars() {
                match c {
                    'a' => flags.after = true,
                    'b' => flags.before = true,
                    'c' => flags.create = true,
                    _ => return Err(err(format!("unknown flag -{c}"))),
                }
            }
        }
        if flags.before && flags.after {
            return Err(err("-a and -b together".into()));
        }
        let args: Vec<String> = words.map(str::to_owned).collect();
        let entry = match (verb, args.as_slice()) {
            ("mount", [addr, old]) => Entry::Mount {
                flags,
                addr: addr.clone(),
                old: old.clone(),
                aname: String::new(),
            },
            ("mount", [addr, old, aname]) => Entry::Mount {
                flags,
                addr: addr.clone(),
                old: old.clone(),
                aname: aname.clone(),
            },
            ("bind", [new, old]) => Entry::Bind {
                flags,
                new: new.clone(),
                old: old.clone(),
            },
            ("unmount", [old]) if flags == Flags::default() => Entry::Unmount {
                new: None,
                old: old.clone(),
            },
            ("unmount", [new, old]) if flags == Flags::default() => Entry::Unmount {
                new: Some(new.clone()),
                old: old.clone(),
            },
            _ => {
                return Err(err(
                    "want 'mount [-abc] ADDR OLD [ANAME]', 'bind [-abc] NEW OLD' \
                     or 'unmount [NEW] OLD'"
                        .into(),
                ));
            }
        };
        entries.push(entry);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_and_print_back() {
        let text = "# a comment\n\
                    mount tcp!fs!564 /n/home\n\
                    mount -c unix!/tmp/s /n/tmp trees/tmp  # with aname\n\
                    bind -b /n/home/bin /bin\n\
                    bind -ac /n/tmp /tmp\n\
                    \n\
                    unmount /n/home/bin /bin\n\
                    unmount /n/tmp\n";
        let entries = parse(text).unwrap();
        assert_eq!(
            entries[1],
            Entry::Mount {
                flags: Flags {
                    create: true,
                    ..Flags::default()
                },
                addr: "unix!/tmp/s".into(),
                old: "/n/tmp".into(),
                aname: "trees/tmp".into()
            }
        );
        let printed: Vec<String> = entries.iter().map(ToString::to_string).collect();
        assert_eq!(
            printed,
            [
                "mount tcp!fs!564 /n/home",
                "mount -c unix!/tmp/s /n/tmp trees/tmp",
                "bind -b /n/home/bin /bin",
                "bind -ac /n/tmp /tmp",
                "unmount /n/home/bin /bin",
                "unmount /n/tmp",
            ]
        );
        assert_eq!(parse(&printed.join("\n")).unwrap(), entries);
    }

    #[test]
    fn bad_lines() {
        for bad in [
            "mount only-one",
            "bind -z /x /y",
            "bind -ab /x /y",
            "unmount -a /x",
            "unmount",
            "mkdir /x",
        ] {
            let e = parse(&format!("# first\n{bad}")).unwrap_err();
            assert_eq!(e.line, 2, "{bad}");
        }
    }
}
