//! Attributes of local files written by `get` and `unpack`: times, modes and owners.
//!
//! Owns the conversion of file-system times to system times and the order in which attributes
//! are applied (owner, then times, then mode, so that a `chown` cannot clear a set-id bit that
//! was just restored). It must never fail because the user may not give a file away: `EPERM`
//! on a change of owner is ignored (only root restores owners).

use std::fs::{File, FileTimes, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dffs::{Stat, Time};

use super::CliError;

/// A file-system time as a system time (`None` if the system cannot represent it).
pub fn system_time(t: Time) -> Option<SystemTime> {
    let nsec = Duration::from_nanos(t.nsec as u64);
    if t.secs >= 0 {
        UNIX_EPOCH.checked_add(Duration::from_secs(t.secs as u64).checked_add(nsec)?)
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::from_secs(t.secs.unsigned_abs()))?
            .checked_add(nsec)
    }
}

/// Changes the owner of an open file, ignoring `EPERM`.
pub fn set_owner(f: &File, path: &Path, st: &Stat) -> Result<(), CliError> {
    match std::os::unix::fs::fchown(f, Some(st.uid), Some(st.gid)) {
        Err(e) if e.kind() != std::io::ErrorKind::PermissionDenied => {
            Err(CliError::local(path, &e))
        }
        _ => Ok(()),
    }
}

/// Changes the owner of a symlink itself, ignoring `EPERM`.
pub fn set_link_owner(path: &Path, st: &Stat) -> Result<(), CliError> {
    match std::os::unix::fs::lchown(path, Some(st.uid), Some(st.gid)) {
        Err(e) if e.kind() != std::io::ErrorKind::PermissionDenied => {
            Err(CliError::local(path, &e))
        }
        _ => Ok(()),
    }
}

/// Gives the open local file or directory `f` (at `path`) the times and mode of `st`.
pub fn set_times_and_mode(f: &File, path: &Path, st: &Stat) -> Result<(), CliError> {
    let mut times = FileTimes::new();
    if let Some(t) = system_time(st.atime) {
        times = times.set_accessed(t);
    }
    if let Some(t) = system_time(st.mtime) {
        times = times.set_modified(t);
    }
    f.set_times(times).map_err(|e| CliError::local(path, &e))?;
    f.set_permissions(Permissions::from_mode(st.mode & 0o7777))
        .map_err(|e| CliError::local(path, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_around_the_epoch() {
        let t = system_time(Time {
            secs: -2,
            nsec: 500_000_000,
        })
        .unwrap();
        assert_eq!(
            UNIX_EPOCH.duration_since(t).unwrap(),
            Duration::from_millis(1500)
        );
        let t = system_time(Time {
            secs: 1_700_000_000,
            nsec: 7,
        })
        .unwrap();
        assert_eq!(
            t.duration_since(UNIX_EPOCH).unwrap(),
            Duration::new(1_700_000_000, 7)
        );
    }
}
