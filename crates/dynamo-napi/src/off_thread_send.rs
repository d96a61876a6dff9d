//! `sendOffThread`: one socket send made by a helper thread while the JS thread waits for it.
//!
//! Linux wakes a TCP reader on the CPU of the thread that wrote (a "sync" wake-up: the writer is
//! expected to sleep next). A worker's JS thread that writes a stream's first item and goes on
//! with its engine's next steps keeps that CPU, so the caller reading the first token waits for
//! the end of its time slice (about 0.5 ms on a 2-core host, for an engine with tokens ready).
//! The helper sleeps right after its send, so the reader runs at once; stock's workers get the
//! same from writing on their Tokio threads.

use std::io;
use std::os::raw::c_int;
use std::sync::mpsc::{channel, sync_channel, Sender, SyncSender};
use std::sync::{Mutex, OnceLock};
use std::thread;

use napi_derive::napi;

use crate::socket_pump::SEND_FLAGS;

struct Job {
    fd: c_int,
    bytes: Vec<u8>,
    done: SyncSender<usize>,
}

/// The helper thread's queue, started on first use.
fn helper() -> &'static Mutex<Sender<Job>> {
    static HELPER: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    HELPER.get_or_init(|| {
        let (jobs, queue) = channel::<Job>();
        thread::Builder::new()
            .name("dynamo-send".into())
            .spawn(move || {
                for job in queue {
                    let _ = job.done.send(send_all(job.fd, &job.bytes));
                }
            })
            .expect("spawning the send helper thread");
        Mutex::new(jobs)
    })
}

/// Sends what the socket takes without blocking; returns how many bytes went out.
fn send_all(fd: c_int, bytes: &[u8]) -> usize {
    let mut sent = 0;
    while sent < bytes.len() {
        // SAFETY: the pointer and length are within `bytes`; the caller owns `fd` and waits.
        let n = unsafe {
            libc::send(
                fd,
                bytes[sent..].as_ptr().cast(),
                bytes.len() - sent,
                SEND_FLAGS,
            )
        };
        if n >= 0 {
            sent += n as usize;
        } else if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            // Full or failed: the caller writes the rest its usual way, which reports any error.
            break;
        }
    }
    sent
}

/// Sends `bytes` on the socket descriptor `fd` from a helper thread and waits for it; returns how
/// many bytes went out (the rest, if any, is the caller's to write). The caller must have nothing
/// else queued for `fd`.
#[napi]
pub fn send_off_thread(fd: i32, bytes: &[u8]) -> napi::Result<u32> {
    let (done, wait) = sync_channel(1);
    let job = Job {
        fd,
        bytes: bytes.to_vec(),
        done,
    };
    helper()
        .lock()
        .map_err(|_| napi::Error::from_reason("the send helper thread's queue is poisoned"))?
        .send(job)
        .map_err(|_| napi::Error::from_reason("the send helper thread is gone"))?;
    let sent = wait
        .recv()
        .map_err(|_| napi::Error::from_reason("the send helper thread is gone"))?;
    Ok(sent as u32)
}
