//! User profiles on disk: `--profile-file FILE` and `$XDG_CONFIG_HOME/firedup/profiles/*.toml`
//! (default `~/.config/firedup/profiles`), read here and parsed by the judge crate's
//! [`parse_checked`]. A bad file is an error naming the file, line and field.

use std::path::{Path, PathBuf};

use crate::error::{Context, Error, Result};

use firedup_judge::profile::{Origin, Profile, ProfileSet, parse_checked};

/// The user profile directory: `$XDG_CONFIG_HOME/firedup/profiles` or `~/.config/firedup/profiles`.
pub fn user_profile_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("firedup/profiles"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config/firedup/profiles"))
}

/// Built-ins, then every `*.toml` in the user profile directory, then `extra` files (in order;
/// a later profile with the same name replaces an earlier one).
pub fn load_profile_set(extra: &[PathBuf]) -> Result<ProfileSet> {
    let mut set = ProfileSet::builtin();
    let mut files: Vec<PathBuf> = Vec::new();
    if let Some(dir) = user_profile_dir() {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            let mut found: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            found.sort();
            files.extend(found);
        }
    }
    files.extend(extra.iter().cloned());
    for f in files {
        let p = load_file(&f)?;
        set.insert(p, Origin::File(f));
    }
    Ok(set)
}

/// Reads and validates one user profile file.
pub fn load_file(path: &Path) -> Result<Profile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read profile file {}", path.display()))?;
    // One mistake a line, each named by file and line.
    parse_checked(&text).map_err(|e| {
        let lines: Vec<String> = e
            .lines()
            .map(|l| format!("{}:{l}", path.display()))
            .collect();
        Error::usage(lines.join("\n"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn user_profiles_override_builtins_by_name_and_detect_first() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("mine.toml");
        std::fs::write(
            &f,
            "name = \"redis\"\ndescription = \"my redis\"\ndetect = ['my-redis']\nready = ['up']\n",
        )
        .unwrap();
        let g = dir.path().join("other.toml");
        std::fs::write(
            &g,
            "name = \"myserver\"\ndescription = \"mine\"\ndetect = ['redis-server']\nready = ['up']\n",
        )
        .unwrap();
        let mut set = ProfileSet::builtin();
        set.insert(load_file(&f).unwrap(), Origin::File(f.clone()));
        set.insert(load_file(&g).unwrap(), Origin::File(g.clone()));
        assert_eq!(set.by_name("redis").unwrap().description, "my redis");
        assert_eq!(set.detect(&cmd("redis-server")).unwrap().name, "myserver");
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "name = \"x\"\n").unwrap();
        let e = load_file(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:", bad.display())), "{e}");
        assert!(e.contains("description"), "{e}");
    }
}
