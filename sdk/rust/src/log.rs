/// The severity of a log line. The values are those of Go's `log/slog`,
/// which the host logs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Level {
    /// Diagnostics for development.
    Debug = -4,
    /// Normal operation.
    Info = 0,
    /// Something unexpected that the computation handled.
    Warn = 4,
    /// Something failed.
    Error = 8,
}

impl Level {
    /// The level's name as `log/slog` writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        }
    }
}

/// Writes `message` to the host's log at `level`; the host adds the
/// plugin's name and may rate-limit. It is meant for diagnostics, not for
/// data: every call crosses the WebAssembly boundary. Outside WebAssembly
/// (native tests of a computation) it writes to standard error.
pub fn log(level: Level, message: &str) {
    sink(level, message)
}

#[cfg(target_arch = "wasm32")]
fn sink(level: Level, message: &str) {
    #[link(wasm_import_module = "flowhost")]
    extern "C" {
        #[link_name = "log"]
        fn flowhost_log(level: i32, ptr: *const u8, len: i32);
    }
    // The host reads exactly len bytes at ptr during the call.
    unsafe { flowhost_log(level as i32, message.as_ptr(), message.len() as i32) }
}

#[cfg(all(not(target_arch = "wasm32"), not(test)))]
fn sink(level: Level, message: &str) {
    eprintln!("flowhost {}: {}", level.as_str(), message);
}

#[cfg(all(not(target_arch = "wasm32"), test))]
fn sink(level: Level, message: &str) {
    captured::push(level, message);
}

/// Log lines of the current test thread, so that tests can assert what the
/// SDK logged.
#[cfg(all(not(target_arch = "wasm32"), test))]
pub(crate) mod captured {
    use super::Level;
    use std::cell::RefCell;

    thread_local! {
        static LINES: RefCell<Vec<(Level, String)>> = RefCell::new(Vec::new());
    }

    pub(crate) fn push(level: Level, message: &str) {
        LINES.with(|l| l.borrow_mut().push((level, message.to_string())));
    }

    /// Returns and forgets the lines logged so far on this thread.
    pub(crate) fn take() -> Vec<(Level, String)> {
        LINES.with(|l| std::mem::take(&mut *l.borrow_mut()))
    }
}
