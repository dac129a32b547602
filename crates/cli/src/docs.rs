//! `ninep install-docs`: manual pages for `ninep` and each of its
//! subcommands, and completions for bash, zsh and fish, made from the
//! command line's own definition so that they always agree with it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Command;
use clap_complete::Shell;

#[derive(clap::Args)]
pub struct Args {
    /// Where to install: pages go to PREFIX/share/man/man1, completions
    /// where bash-completion, zsh and fish look under PREFIX/share.
    #[arg(default_value = "/usr/local")]
    prefix: PathBuf,
}

/// Each shell, and where under the prefix its completions go.
const COMPLETIONS: [(Shell, &str); 3] = [
    (Shell::Bash, "share/bash-completion/completions/ninep"),
    (Shell::Zsh, "share/zsh/site-functions/_ninep"),
    (Shell::Fish, "share/fish/vendor_completions.d/ninep.fish"),
];

pub fn run(args: Args, cmd: Command) -> Result<ExitCode> {
    install(cmd, &args.prefix)?;
    eprintln!(
        "ninep: installed manual pages and completions under {}",
        args.prefix.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes the manual pages (ninep.1, ninep-serve.1, ninep-bench-rtt.1, ...;
/// none for hidden subcommands) and the completions for `cmd` under
/// `prefix`.
pub fn install(cmd: Command, prefix: &Path) -> Result<()> {
    let man = prefix.join("share/man/man1");
    std::fs::create_dir_all(&man).with_context(|| man.display().to_string())?;
    clap_mangen::generate_to(cmd.clone(), &man).with_context(|| man.display().to_string())?;
    for (shell, file) in COMPLETIONS {
        let path = prefix.join(file);
        let write = || -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let mut out = std::fs::File::create(&path)?;
            clap_complete::generate(shell, &mut cmd.clone(), "ninep", &mut out);
            Ok(())
        };
        write().with_context(|| path.display().to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `ninep-serve`, `ninep-bench-rtt`, ...: the page name of every
    /// subcommand a user can see, at any depth.
    fn visible(cmd: &Command, prefix: &str, names: &mut Vec<String>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let name = format!("{prefix}-{}", sub.get_name());
            visible(sub, &name, names);
            names.push(name);
        }
    }

    #[test]
    fn a_page_for_each_subcommand_and_completions_for_each_shell() {
        let prefix = std::env::temp_dir().join(format!("ninep-docs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&prefix);
        let cmd = crate::Cli::command();
        install(cmd.clone(), &prefix).unwrap();

        let mut names = vec!["ninep".to_owned()];
        visible(&cmd, "ninep", &mut names);
        assert!(names.contains(&"ninep-bench-rtt".to_owned()), "{names:?}");
        let man = prefix.join("share/man/man1");
        for name in &names {
            let page = std::fs::read_to_string(man.join(format!("{name}.1")))
                .unwrap_or_else(|e| panic!("{name}.1: {e}"));
            assert!(page.contains(".TH "), "{name}.1 has no title");
            assert!(
                page.contains(env!("NINEP_COMMIT")),
                "{name}.1 has no version"
            );
        }
        let mut pages: Vec<String> = std::fs::read_dir(&man)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        pages.sort();
        let mut wanted: Vec<String> = names.iter().map(|n| format!("{n}.1")).collect();
        wanted.sort();
        assert_eq!(
            pages, wanted,
            "a page for each visible subcommand, and no others"
        );
        let serve = std::fs::read_to_string(man.join("ninep-serve.1")).unwrap();
        assert!(
            serve.contains("\\-\\-listen"),
            "ninep-serve.1 lacks --listen"
        );

        for (shell, file) in COMPLETIONS {
            let text = std::fs::read_to_string(prefix.join(file)).unwrap();
            for word in ["serve", "mux", "mount", "listen"] {
                assert!(text.contains(word), "{shell} completions lack {word}");
            }
        }
        std::fs::remove_dir_all(&prefix).unwrap();
    }
}
