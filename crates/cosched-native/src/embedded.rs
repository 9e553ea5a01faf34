//! The preload library and the benchmarks compiled into the program, for an install that has nothing
//! but the executable (`cargo install`): written once into a cache directory and used from there.

use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

macro_rules! artefact {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!(env!("OUT_DIR"), "/native/", $name)).as_slice(),
        )
    };
}

/// Every file `lib/cosched/` holds, by name.
pub(crate) const ARTEFACTS: &[(&str, &[u8])] = &[
    artefact!("libcosched-omp.so"),
    artefact!("barrier"),
    artefact!("stress"),
    artefact!("dense"),
    artefact!("stencil"),
    artefact!("spmv"),
    artefact!("longregion"),
];

/// Where the files are written: under the user's cache directory; as root, under `/var/cache`, since
/// jobs that run as the user who invoked sudo must be able to read and execute them.
fn cache_root() -> Option<PathBuf> {
    if nix::unistd::geteuid().is_root() {
        return Some(PathBuf::from("/var/cache/cosched"));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
    Some(cache.join("cosched"))
}

/// The directory holding the embedded files, written there first if needed.
pub fn extract() -> io::Result<PathBuf> {
    let root = cache_root().ok_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, "no cache directory (HOME unset)")
    })?;
    extract_into(&root)
}

/// Writes the files into `root/native-<fingerprint>` unless a complete copy is there. The copy is
/// made in a directory of its own and renamed into place, so concurrent runs never see half of it.
pub(crate) fn extract_into(root: &Path) -> io::Result<PathBuf> {
    let dir = root.join(format!("native-{:016x}", fingerprint()));
    if complete(&dir) {
        return Ok(dir);
    }
    std::fs::create_dir_all(root)?;
    let partial = root.join(format!(".native-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir(&partial)?;
    for (name, bytes) in ARTEFACTS {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .open(partial.join(name))?;
        file.write_all(bytes)?;
    }
    if let Err(e) = std::fs::rename(&partial, &dir) {
        let _ = std::fs::remove_dir_all(&partial);
        if !complete(&dir) {
            return Err(e);
        }
    }
    Ok(dir)
}

fn complete(dir: &Path) -> bool {
    ARTEFACTS.iter().all(|(name, bytes)| {
        std::fs::metadata(dir.join(name)).is_ok_and(|m| m.len() == bytes.len() as u64)
    })
}

/// FNV-1a over every file, so that another build never reuses this one's copy.
fn fingerprint() -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, bytes) in ARTEFACTS {
        for byte in name.bytes().chain(bytes.iter().copied()) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn every_artefact_is_embedded_and_extracts_executable() {
        let mut names: Vec<&str> = ARTEFACTS.iter().map(|(name, _)| *name).collect();
        names.sort();
        let mut expected: Vec<&str> = crate::BENCHMARKS.to_vec();
        expected.push(crate::PRELOAD_LIBRARY_NAME);
        expected.sort();
        assert_eq!(names, expected);

        let root = tempfile::tempdir().unwrap();
        let dir = extract_into(root.path()).unwrap();
        for (name, bytes) in ARTEFACTS {
            let path = dir.join(name);
            assert_eq!(std::fs::read(&path).unwrap(), *bytes, "{name}");
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o111, 0o111, "{name} is not executable");
        }
        assert_eq!(
            extract_into(root.path()).unwrap(),
            dir,
            "a second extraction reuses the first"
        );
    }
}
