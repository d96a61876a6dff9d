//! The few libuv functions the socket pumps use: Node exports libuv to addons, so these handles
//! run on Node's own loop.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::c_void;
use std::os::raw::c_int;

use napi::sys;

/// libuv's `UV_POLL` and `UV_TIMER` handle types and `UV_READABLE` event.
pub const UV_POLL: c_int = 8;
pub const UV_TIMER: c_int = 13;
pub const UV_READABLE: c_int = 1;

pub type PollCallback = unsafe extern "C" fn(*mut c_void, c_int, c_int);
pub type HandleCallback = unsafe extern "C" fn(*mut c_void);

extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    pub fn uv_poll_init(event_loop: *mut sys::uv_loop_s, handle: *mut c_void, fd: c_int) -> c_int;
    pub fn uv_poll_start(handle: *mut c_void, events: c_int, cb: PollCallback) -> c_int;
    pub fn uv_poll_stop(handle: *mut c_void) -> c_int;
    pub fn uv_close(handle: *mut c_void, cb: HandleCallback);
    pub fn uv_timer_init(event_loop: *mut sys::uv_loop_s, handle: *mut c_void) -> c_int;
    pub fn uv_timer_start(
        handle: *mut c_void,
        cb: HandleCallback,
        timeout: u64,
        repeat: u64,
    ) -> c_int;
}

fn layout(kind: c_int) -> Layout {
    // SAFETY: a pure query of libuv's handle sizes.
    let size = unsafe { uv_handle_size(kind) };
    Layout::from_size_align(size, 16).expect("libuv's handle size")
}

/// Zeroed memory for a handle of `kind`, whose first field (libuv's `data`) is set to `data`.
pub fn alloc_handle<T>(kind: c_int, data: *mut T) -> *mut c_void {
    // SAFETY: libuv's handle sizes are never zero; `data` is the handle's first, pointer-sized field.
    unsafe {
        let handle = alloc_zeroed(layout(kind)).cast::<c_void>();
        *handle.cast::<*mut T>() = data;
        handle
    }
}

/// Frees a handle from [`alloc_handle`], once libuv has closed it (or it was never initialized).
///
/// # Safety
/// `handle` came from `alloc_handle(kind, ..)` and libuv no longer knows it.
pub unsafe fn free_handle(handle: *mut c_void, kind: c_int) {
    dealloc(handle.cast(), layout(kind));
}

/// What a handle's `data` field points to.
///
/// # Safety
/// `handle` came from [`alloc_handle`] with a `*mut T`.
pub unsafe fn handle_data<T>(handle: *mut c_void) -> *mut T {
    *handle.cast::<*mut T>()
}

/// Frees `handle`, one of an owner's poll handle (`poll`) and timer, once libuv has closed it, and
/// counts it off the owner's `open` handles: true when it was the last, and the owner can go.
///
/// # Safety
/// `handle` is `poll` or the owner's timer, both from [`alloc_handle`], and libuv has closed it.
pub unsafe fn free_closed(handle: *mut c_void, poll: *mut c_void, open: &mut u8) -> bool {
    free_handle(handle, if handle == poll { UV_POLL } else { UV_TIMER });
    *open -= 1;
    *open == 0
}
