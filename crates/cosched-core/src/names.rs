//! Names from input files that become parts of output paths (workload and job names, policy names,
//! labels): what a name may be, and how any text is made a file-name part that cannot leave its
//! directory.

/// A workload or job name that cannot name output files as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error(
        "{name:?} must be non-empty, not start with '.', and contain no '/' or '\\' (it names output files)"
    )]
    LeavesDirectory { name: String },
    #[error("{name:?} contains a control character (it names output files)")]
    ControlCharacter { name: String },
}

/// Checks a workload or job name, which names output files and directories as it is.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if name.is_empty() || name.contains(['/', '\\', '\0']) || name.starts_with('.') {
        return Err(NameError::LeavesDirectory {
            name: name.to_string(),
        });
    }
    if name.chars().any(char::is_control) {
        return Err(NameError::ControlCharacter {
            name: name.to_string(),
        });
    }
    Ok(())
}

/// `text` as one file-name part: letters, digits, `-`, `_` and `.` kept, everything else `_`, and a
/// leading `.` replaced, so the result never names a parent directory, a hidden file or a subdirectory.
pub fn file_name_part(text: &str) -> String {
    let mut part: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if part.is_empty() || part.starts_with('.') {
        part.insert(0, '_');
    }
    part
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_leave_their_directory_are_refused() {
        for bad in ["", "../../etc/x", "a/b", ".hidden", "..", "a\\b", "a\nb"] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["default", "lu.A", "set b", "taco-table4"] {
            assert!(check_name(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn file_name_parts_stay_in_their_directory() {
        assert_eq!(file_name_part("taco:sizes=1/6/24"), "taco_sizes_1_6_24");
        assert_eq!(file_name_part("../../etc/x"), "_.._.._etc_x");
        assert_eq!(file_name_part(".."), "_..");
        assert_eq!(file_name_part(""), "_");
        assert_eq!(file_name_part("ue"), "ue");
    }
}
