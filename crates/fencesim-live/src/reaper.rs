//! Everything a live run starts that must not outlive it: server process groups, processes and
//! temporary folders. Each owner (a server, a node, the client processes) removes its own on
//! drop; this list is for the exits that run no destructor: a second Ctrl-C ("quit at once"),
//! which calls [`reap_all`] before the process exits. For a SIGKILL of fencesim itself, which
//! nothing can handle, [`die_with_parent`] has the kernel kill the processes (the folders
//! stay).

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

/// What is owned, by id, and the last id given.
static OWNED: Mutex<(u64, Vec<(u64, Owned)>)> = Mutex::new((0, Vec::new()));

/// Note `owned`; the returned id forgets it again ([`forget`]) once its owner removed it.
pub fn own(owned: Owned) -> u64 {
    let Ok(mut list) = OWNED.lock() else {
        return 0;
    };
    list.0 += 1;
    let id = list.0;
    list.1.push((id, owned));
    id
}

/// Its owner removed it.
pub fn forget(id: u64) {
    if let Ok(mut list) = OWNED.lock() {
        list.1.retain(|(i, _)| *i != id);
    }
}

/// Kill every owned process and group (continuing them first, in case they are stopped) and
/// delete every owned folder. Safe to call from a signal handler's thread at exit.
pub fn reap_all() {
    let owned: Vec<Owned> = match OWNED.lock() {
        Ok(mut list) => list.1.drain(..).map(|(_, o)| o).collect(),
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
