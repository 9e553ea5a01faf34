//! Reading a job's log file in bounded memory: only a regular file is read (a job's user chooses
//! the path, and `/dev/zero` or a FIFO would have its reader fill memory or wait forever), in
//! blocks, up to the length it had when opened.

use anyhow::Context as _;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Bytes read at once.
const BLOCK: usize = 64 * 1024;

/// The log at `path`, if it exists yet, with its length now; an error naming it if it is not a
/// regular file.
pub fn open(path: &Path) -> anyhow::Result<Option<(File, u64)>> {
    // Non-blocking: opening a FIFO for reading would wait for a writer.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(e).with_context(|| {
                format!("cannot read {}; only the job's owner may", path.display())
            })
        }
    };
    let meta = file.metadata()?;
    let kind = meta.file_type();
    let what = match () {
        _ if kind.is_file() => return Ok(Some((file, meta.len()))),
        _ if kind.is_fifo() => "a FIFO",
        _ if kind.is_char_device() => "a character device",
        _ if kind.is_block_device() => "a block device",
        _ if kind.is_socket() => "a socket",
        _ => "not a regular file",
    };
    anyhow::bail!(
        "{} is {what}: cosched logs reads only regular files",
        path.display()
    )
}

/// Where the last `lines` lines of `file`'s first `len` bytes begin, read backwards a block at a
/// time.
pub fn tail_offset(file: &mut File, len: u64, lines: u64) -> std::io::Result<u64> {
    if lines == 0 {
        return Ok(len);
    }
    let mut block = vec![0u8; BLOCK];
    let mut end = len;
    // A last line without its newline counts as a line; a newline ending the file begins none.
    let mut newlines = 0;
    let mut last_byte = true;
    while end > 0 {
        let start = end.saturating_sub(BLOCK as u64);
        let part = &mut block[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(part)?;
        for (i, &byte) in part.iter().enumerate().rev() {
            let at_end = std::mem::take(&mut last_byte);
            if byte == b'\n' && !at_end {
                newlines += 1;
                if newlines == lines {
                    return Ok(start + i as u64 + 1);
                }
            }
        }
        end = start;
    }
    Ok(0)
}

/// How what is read is written out: as it is, or as JSON lines naming the job and stream.
#[derive(Clone, Copy)]
pub enum Shape<'a> {
    Raw,
    Json { id: u64, stream: &'a str },
}

/// Copies `file` from `from` to `to`, a block at a time; the offset reached. In JSON, a character
/// cut by a block's end waits for the next block, or the next call.
pub fn copy(
    file: &mut File,
    from: u64,
    to: u64,
    out: &mut impl Write,
    shape: Shape,
) -> anyhow::Result<u64> {
    file.seek(SeekFrom::Start(from))?;
    let mut block = vec![0u8; BLOCK];
    let mut offset = from;
    while offset < to {
        let want = BLOCK.min((to - offset) as usize);
        let read = file.read(&mut block[..want])?;
        if read == 0 {
            break;
        }
        let written = match shape {
            Shape::Raw => {
                out.write_all(&block[..read])?;
                read
            }
            Shape::Json { id, stream } => {
                let whole = whole_characters(&block[..read]);
                if whole == 0 {
                    break;
                }
                let text = String::from_utf8_lossy(&block[..whole]);
                let line = serde_json::json!({ "id": id, "stream": stream, "text": text });
                writeln!(out, "{line}")?;
                whole
            }
        };
        offset += written as u64;
        file.seek(SeekFrom::Start(offset))?;
    }
    out.flush()?;
    Ok(offset)
}

/// How many of `bytes` end before a UTF-8 character cut off at their end.
fn whole_characters(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        // Invalid bytes are replaced, not waited for.
        Err(_) => bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(text: &str) -> (tempfile::NamedTempFile, File, u64) {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(text.as_bytes()).unwrap();
        let file = File::open(tmp.path()).unwrap();
        (tmp, file, text.len() as u64)
    }

    fn tail(text: &str, lines: u64) -> String {
        let (_tmp, mut file, len) = file_with(text);
        let from = tail_offset(&mut file, len, lines).unwrap();
        text[from as usize..].to_string()
    }

    #[test]
    fn the_tail_is_the_last_lines_with_or_without_a_final_newline() {
        assert_eq!(tail("a\nb\nc\nd\n", 2), "c\nd\n");
        assert_eq!(tail("a\nb\nc\nd", 2), "c\nd");
        assert_eq!(tail("a\nb\n", 5), "a\nb\n");
        assert_eq!(tail("", 3), "");
        assert_eq!(tail("a\n", 0), "");
        // Lines across blocks.
        let long: String = (0..50_000).map(|i| format!("line {i}\n")).collect();
        assert_eq!(tail(&long, 3), "line 49997\nline 49998\nline 49999\n");
    }

    #[test]
    fn json_pieces_never_cut_a_character() {
        let text = "é".repeat(BLOCK);
        let (_tmp, mut file, len) = file_with(&text);
        let mut out = Vec::new();
        let shape = Shape::Json {
            id: 1,
            stream: "stdout",
        };
        assert_eq!(copy(&mut file, 0, len, &mut out, shape).unwrap(), len);
        let mut joined = String::new();
        for line in String::from_utf8(out).unwrap().lines() {
            let piece: serde_json::Value = serde_json::from_str(line).unwrap();
            joined.push_str(piece["text"].as_str().unwrap());
        }
        assert_eq!(joined, text);
    }

    #[test]
    fn what_is_not_a_regular_file_is_refused_naming_it() {
        let message = open(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(
            message.contains("/dev/zero is a character device"),
            "{message}"
        );
        assert!(open(Path::new("/nonexistent/log")).unwrap().is_none());
    }
}
