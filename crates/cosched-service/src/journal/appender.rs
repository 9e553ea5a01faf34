//! The journal's end, where entries are appended. A write that fails part way (a full file system)
//! is cut back to the last whole entry before anything else is written: otherwise the next entry,
//! acknowledged, would be glued to the torn one and skipped with it at the next replay.

use std::fs::File;
use std::io::{self, Write};

pub struct Appender {
    file: File,
    /// Entries appended since the journal was opened.
    pub entries: u64,
    /// Bytes of whole entries in the file.
    pub len: u64,
    /// A failed write left bytes past `len` that could not be cut off yet.
    torn: bool,
    /// Writes past this many bytes fail as on a full file system, for tests.
    #[cfg(test)]
    pub fail_at: Option<u64>,
}

impl Appender {
    /// `file` is open for appending and holds `len` bytes of whole entries.
    pub fn new(file: File, len: u64, entries: u64) -> Appender {
        Appender {
            file,
            entries,
            len,
            torn: false,
            #[cfg(test)]
            fail_at: None,
        }
    }

    /// Goes on at the end of `file`, which took the old file's place with `len` bytes.
    pub fn replace(&mut self, file: File, len: u64) {
        self.file = file;
        self.len = len;
        self.torn = false;
    }

    /// Appends `line`, a whole entry with its newline, or leaves the file as it was.
    pub fn append(&mut self, line: &[u8]) -> io::Result<()> {
        if self.torn {
            self.file.set_len(self.len)?;
            self.torn = false;
        }
        if let Err(e) = self.write(line) {
            // Cutting a file shorter needs no space; should it fail all the same, the next append
            // tries again before it writes.
            self.torn = self.file.set_len(self.len).is_err();
            return Err(e);
        }
        self.len += line.len() as u64;
        self.entries += 1;
        Ok(())
    }

    #[cfg(not(test))]
    fn write(&mut self, line: &[u8]) -> io::Result<()> {
        self.file.write_all(line)
    }

    /// Writes what fits below `fail_at`, then fails as a full file system does.
    #[cfg(test)]
    fn write(&mut self, line: &[u8]) -> io::Result<()> {
        let room = self
            .fail_at
            .map_or(u64::MAX, |at| at.saturating_sub(self.len));
        if (line.len() as u64) <= room {
            return self.file.write_all(line);
        }
        self.file.write_all(&line[..room as usize])?;
        Err(io::Error::from_raw_os_error(libc::ENOSPC))
    }
}
