//! A shard's log on disk: a directory `shard-<i>` in the data directory, holding
//! segment files `wal-<n>.log` (n counts from 1, zero-padded so names sort). A
//! segment is closed once it passes [`SEGMENT_BYTES_MAX`] and the next one is
//! started; recovery reads them in order. Smaller files keep a future snapshot's
//! "delete the log it covers" to whole-file deletions.

use std::path::{Path, PathBuf};

/// A segment is closed after the record that takes it past this size.
pub const SEGMENT_BYTES_MAX: u64 = 64 << 20;

/// The directory of shard `shard`'s log inside the data directory.
pub fn shard_dir(data_dir: &Path, shard: usize) -> PathBuf {
    data_dir.join(format!("shard-{shard}"))
}

/// The file name of segment `n`.
pub fn segment_name(n: u64) -> String {
    format!("wal-{n:010}.log")
}

/// The segment numbers in `dir`, in order (other files are ignored).
pub fn list_segments(dir: &Path) -> std::io::Result<Vec<u64>> {
    let mut numbers = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for entry in entries {
                let name = entry?.file_name();
                let Some(name) = name.to_str() else { continue };
                if let Some(n) = name
                    .strip_prefix("wal-")
                    .and_then(|r| r.strip_suffix(".log"))
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    numbers.push(n);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    numbers.sort_unstable();
    Ok(numbers)
}

/// The numbers of the shards' directories in `data_dir` (`shard-0` ...): a start
/// with another shard count moves the keys to their new owners first.
pub fn shard_dirs(data_dir: &Path) -> std::io::Result<Vec<usize>> {
    let mut shards = Vec::new();
    match std::fs::read_dir(data_dir) {
        Ok(entries) => {
            for entry in entries {
                let name = entry?.file_name();
                if let Some(n) = name
                    .to_str()
                    .and_then(|n| n.strip_prefix("shard-"))
                    .and_then(|n| n.parse().ok())
                {
                    shards.push(n);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    shards.sort_unstable();
    Ok(shards)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_listed_in_order() {
        let dir = std::env::temp_dir().join(format!("ruvio-wal-seg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for n in [3, 1, 12] {
            std::fs::write(dir.join(segment_name(n)), b"").unwrap();
        }
        std::fs::write(dir.join("other.txt"), b"").unwrap();
        assert_eq!(list_segments(&dir).unwrap(), vec![1, 3, 12]);
        assert_eq!(
            list_segments(&dir.join("missing")).unwrap(),
            Vec::<u64>::new()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
