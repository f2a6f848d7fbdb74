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
    Ok(list.push(Owned::Folder(path.to_owned())))
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
