//! Everything a live run starts that must not outlive it: server process groups, processes and
//! temporary folders. Each owner (a server, a node, the client processes) removes its own on
//! drop; this list is for the exits that run no destructor: a second Ctrl-C ("quit at once"),
//! which calls [`reap_all`] before the process exits. For a SIGKILL of fencesim itself, which
//! nothing can handle, [`die_with_parent`] has the kernel kill the processes, and the folders
//! stay until the next live run removes them ([`remove_leftovers`]): each folder names its
//! owner's process id and holds its start time (the file `owner`), so that a folder is removed
//! only once the run that made it is gone, even if its process id was given to another.
//!
//! The list is process-wide state, the one kind signal handling needs: a second Ctrl-C runs on
//! the signal handler's thread and must reach everything every thread of the run started.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// Something a live run owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owned {
    /// A process group (PostgreSQL's postmaster and backends; a client process).
    Group(i32),
    /// One process (a Redis node).
    Process(i32),
    /// A temporary folder.
    Folder(PathBuf),
}

/// What is owned, by id.
struct List {
    /// The last id given.
    last_id: u64,
    owned: Vec<(u64, Owned)>,
    /// Set by [`reap_all`]: the run is quitting, and no folder may be made any more.
    reaping: bool,
}

static OWNED: Mutex<List> = Mutex::new(List {
    last_id: 0,
    owned: Vec::new(),
    reaping: false,
});

impl List {
    fn push(&mut self, owned: Owned) -> u64 {
        self.last_id += 1;
        self.owned.push((self.last_id, owned));
        self.last_id
    }
}

/// Note `owned`; the returned id forgets it again ([`forget`]) once its owner removed it.
pub fn own(owned: Owned) -> u64 {
    match OWNED.lock() {
        Ok(mut list) => list.push(owned),
        Err(_) => 0,
    }
}

/// Make the folder `path` (as `fs::create_dir`) and own it in one step, so that a folder
/// cannot be made between [`reap_all`]'s sweep and the exit that follows it (it would be left
/// behind, with nothing to remove it).
///
/// # Errors
/// `create_dir`'s (`AlreadyExists` for a name in use), or `Interrupted` once the run is
/// quitting.
pub fn create_folder(path: &std::path::Path) -> std::io::Result<u64> {
    let mut list = OWNED
        .lock()
        .map_err(|_| std::io::Error::other("the list of what the live run owns is poisoned"))?;
    if list.reaping {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "the live run is quitting",
        ));
    }
    std::fs::create_dir(path)?;
    let id = list.push(Owned::Folder(path.to_owned()));
    // Who made it, for a later run's sweep; a folder without it is judged by its name's pid.
    if let Some(start) = start_time(std::process::id()) {
        std::fs::write(
            path.join(OWNER_FILE),
            format!("{} {start}\n", std::process::id()),
        )?;
    }
    Ok(id)
}

/// The file in each temporary folder that names the process that made it and when that
/// process started.
const OWNER_FILE: &str = "owner";

/// What every temporary folder of a live run is called: `fencesim-live-WHAT-PID-N`.
pub const FOLDER_PREFIX: &str = "fencesim-live-";

/// When process `pid` started, in clock ticks since boot (`/proc/PID/stat`'s 22nd field),
/// or `None` if there is no such process.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the run that made `folder` (named `fencesim-live-WHAT-PID-N`) is still running: its
/// process exists and, where the folder says when its owner started, started then.
fn owner_alive(folder: &std::path::Path, pid: u32) -> bool {
    let owner = std::fs::read_to_string(folder.join(OWNER_FILE)).ok();
    let started = owner.as_deref().and_then(|o| {
        let (owner_pid, start) = o.trim().split_once(' ')?;
        (owner_pid.parse::<u32>().ok()? == pid).then(|| start.parse::<u64>().ok())?
    });
    match (start_time(pid), started) {
        (None, _) => false,
        (Some(now), Some(then)) => now == then,
        // No owner file (an older fencesim's folder, or one being made): the pid decides.
        (Some(_), None) => true,
    }
}

/// Kill (continued first) every process whose working folder is inside `folder`: a
/// PostgreSQL server's backends, which the parent-death signal does not reach (only the
/// postmaster has it), and which a pause may have left stopped, orphaned for good.
fn kill_processes_in(folder: &std::path::Path) {
    let Ok(processes) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in processes.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let inside =
            std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(folder));
        if inside {
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// Remove the temporary folders under `base` of live runs that are gone (killed with
/// SIGKILL, which leaves them: the module's doc), and return them. A folder this user may
/// not remove is left and not counted.
pub fn remove_leftovers(base: &std::path::Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let mut removed: Vec<PathBuf> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let rest = name.strip_prefix(FOLDER_PREFIX)?;
            // WHAT-PID-N: the pid is the second field from the end.
            let mut fields = rest.rsplit('-');
            fields.next()?.parse::<u32>().ok()?;
            let pid: u32 = fields.next()?.parse().ok()?;
            let path = entry.path();
            let gone = pid != std::process::id()
                && entry.file_type().is_ok_and(|t| t.is_dir())
                && !owner_alive(&path, pid);
            if gone {
                kill_processes_in(&path);
            }
            (gone && std::fs::remove_dir_all(&path).is_ok()).then_some(path)
        })
        .collect();
    removed.sort();
    removed
}

/// Its owner removed it.
pub fn forget(id: u64) {
    if let Ok(mut list) = OWNED.lock() {
        list.owned.retain(|(i, _)| *i != id);
    }
}

/// Kill every owned process and group (continuing them first, in case they are stopped) and
/// delete every owned folder; no folder can be made after it ([`create_folder`]). Safe to call
/// from a signal handler's thread at exit.
pub fn reap_all() {
    let owned: Vec<Owned> = match OWNED.lock() {
        Ok(mut list) => {
            list.reaping = true;
            list.owned.drain(..).map(|(_, o)| o).collect()
        }
        Err(_) => return,
    };
    for o in &owned {
        match o {
            Owned::Group(pid) => {
                let _ = killpg(Pid::from_raw(*pid), Signal::SIGCONT);
                let _ = killpg(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            Owned::Process(pid) => {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGCONT);
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            Owned::Folder(_) => {}
        }
    }
    // The processes must be gone before their folders (PostgreSQL writes until it dies); a
    // SIGKILL takes effect at the target's next entry into the kernel.
    std::thread::sleep(std::time::Duration::from_millis(20));
    for o in owned {
        if let Owned::Folder(path) = o {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// Have the process `command` starts killed (SIGKILL) when fencesim dies, even by a SIGKILL
/// that runs no handler (Linux's parent-death signal). It must be spawned from the thread
/// that lives as long as the run (the main thread): the signal follows the thread.
pub fn die_with_parent(command: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and only makes one system
    // call, which is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(command, || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_folders_of_runs_that_are_gone_are_removed() {
        let base =
            std::env::temp_dir().join(format!("fencesim-reaper-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        // A process that has exited: its pid names no process (a pid is not reused at once).
        let mut child = Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let me = std::process::id();
        let folder = |name: String, owner: Option<String>| {
            let path = base.join(name);
            std::fs::create_dir_all(path.join("data")).unwrap();
            if let Some(owner) = owner {
                std::fs::write(path.join(OWNER_FILE), owner).unwrap();
            }
            path
        };
        let gone_pg = folder(format!("fencesim-live-pg-{dead}-0"), None);
        let gone_redis = folder(format!("fencesim-live-redis-2-{dead}-3"), None);
        // pid 1 lives, but did not start at tick 1 after boot's first: a reused pid.
        let reused = folder("fencesim-live-pg-1-0".to_owned(), Some("1 1\n".to_owned()));
        let init = folder("fencesim-live-pg-1-1".to_owned(), None);
        let mine = folder(format!("fencesim-live-pg-{me}-0"), None);
        let other = folder(format!("fencesim-live-notes-{dead}"), None);
        let removed = remove_leftovers(&base);
        let start_of_init = start_time(1).unwrap();
        let expect_reused = start_of_init != 1;
        let mut expected = vec![gone_pg.clone(), gone_redis.clone()];
        if expect_reused {
            expected.push(reused.clone());
        }
        expected.sort();
        assert_eq!(removed, expected);
        assert!(!gone_pg.exists() && !gone_redis.exists());
        assert_eq!(reused.exists(), !expect_reused);
        assert!(init.exists() && mine.exists() && other.exists());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_stopped_process_working_in_a_leftover_folder_is_killed() {
        let folder =
            std::env::temp_dir().join(format!("fencesim-reaper-cwd-{}", std::process::id()));
        std::fs::create_dir_all(folder.join("data")).unwrap();
        let mut child = Command::new("sleep")
            .arg("100")
            .current_dir(folder.join("data"))
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        kill(pid, Signal::SIGSTOP).unwrap();
        kill_processes_in(&folder);
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn a_folder_made_by_this_run_names_its_start() {
        let path = std::env::temp_dir().join(format!(
            "{FOLDER_PREFIX}test-{}-{}",
            std::process::id(),
            line!()
        ));
        let id = create_folder(&path).unwrap();
        let owner = std::fs::read_to_string(path.join(OWNER_FILE)).unwrap();
        let start = start_time(std::process::id()).unwrap();
        assert_eq!(owner, format!("{} {start}\n", std::process::id()));
        assert!(owner_alive(&path, std::process::id()));
        forget(id);
        std::fs::remove_dir_all(&path).unwrap();
    }
}
