//! One epoll set for the call-home sockets of a JavaScript thread's streams once they have sent
//! tokens, polled by a single libuv handle on Node's loop.
//!
//! With many streams, each one's tokens come milliseconds apart but all of them together come
//! every few tens of microseconds, so reading each socket as its frame arrives wakes the loop
//! for one or two frames at a time, and a hold per stream cannot batch that. The set can: after a
//! turn that sent tokens less than [`HOLD`] after the last such turn, its one handle leaves the
//! loop's poll set for [`HOLD`] (two `epoll_ctl` a millisecond, not two a stream), and the next
//! turn reads every stream's frames of that millisecond at once. Everything else on the loop
//! (HTTP, new connections, timers, a stream's first frame, read before its socket joins) wakes
//! it as before, so only tokens after a stream's first wait, and never more than [`HOLD`].

use std::cell::Cell;
use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;
use std::time::Instant;

use napi::sys;

use crate::socket_pump::{self, Pump, HOLD};
use crate::uv;

/// Ready sockets taken per epoll wait; more wait for the next turn.
const EVENTS: usize = 256;

struct Group {
    epfd: c_int,
    handle: *mut c_void,
    timer: *mut c_void,
    /// Sockets in the set: the handle polls while there are any and no hold runs.
    members: usize,
    /// The timer runs and the handle is stopped.
    holding: bool,
    /// When the last turn that sent tokens ended.
    last_sends: Option<Instant>,
    /// Handles not closed yet: the group goes with the last close callback.
    open: u8,
}

thread_local! {
    /// This thread's group (each JavaScript thread has its own loop), or null before the first.
    static GROUP: Cell<*mut Group> = const { Cell::new(ptr::null_mut()) };
}

/// This thread's group, made on first use; null when it cannot be (its sockets then stay on
/// handles of their own).
unsafe fn group(env: sys::napi_env, event_loop: *mut sys::uv_loop_s) -> *mut Group {
    let current = GROUP.get();
    if !current.is_null() {
        return current;
    }
    let epfd = libc::epoll_create1(libc::EPOLL_CLOEXEC);
    if epfd < 0 {
        return ptr::null_mut();
    }
    let group = Box::into_raw(Box::new(Group {
        epfd,
        handle: ptr::null_mut(),
        timer: ptr::null_mut(),
        members: 0,
        holding: false,
        last_sends: None,
        open: 2,
    }));
    let handle = uv::alloc_handle(uv::UV_POLL, group);
    if uv::uv_poll_init(event_loop, handle, epfd) != 0 {
        uv::free_handle(handle, uv::UV_POLL);
        libc::close(epfd);
        drop(Box::from_raw(group));
        return ptr::null_mut();
    }
    // uv_timer_init cannot fail.
    let timer = uv::alloc_handle(uv::UV_TIMER, group);
    uv::uv_timer_init(event_loop, timer);
    (*group).handle = handle;
    (*group).timer = timer;
    // A worker thread's loop must have no handle left open when it ends.
    sys::napi_add_env_cleanup_hook(env, Some(on_env_cleanup), group.cast());
    GROUP.set(group);
    group
}

/// Adds a pump's socket to this thread's set, with the pump as its events' data; false when no
/// set can be had.
///
/// # Safety
/// `pump` is live until [`leave`] for `fd`, and `env`/`event_loop` are this thread's.
pub unsafe fn join(
    env: sys::napi_env,
    event_loop: *mut sys::uv_loop_s,
    fd: c_int,
    pump: *mut Pump,
) -> bool {
    let group = group(env, event_loop);
    if group.is_null() {
        return false;
    }
    let mut event = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: pump as u64,
    };
    if libc::epoll_ctl((*group).epfd, libc::EPOLL_CTL_ADD, fd, &mut event) != 0 {
        return false;
    }
    (*group).members += 1;
    if (*group).members == 1 && !(*group).holding {
        uv::uv_poll_start((*group).handle, uv::UV_READABLE, on_ready);
    }
    true
}

/// Takes a socket out of this thread's set (the pump is paused or stopped).
///
/// # Safety
/// `fd` was added by [`join`] on this thread and not taken out since.
pub unsafe fn leave(fd: c_int) {
    let group = GROUP.get();
    if group.is_null() {
        return;
    }
    // Closing our duplicate would not do it: Node's descriptor keeps the socket open.
    libc::epoll_ctl((*group).epfd, libc::EPOLL_CTL_DEL, fd, ptr::null_mut());
    (*group).members -= 1;
    if (*group).members == 0 {
        uv::uv_poll_stop((*group).handle);
    }
}

unsafe extern "C" fn on_ready(handle: *mut c_void, _status: c_int, _events: c_int) {
    // No reference to the group is held across the reads: their JavaScript may join or leave.
    let group = uv::handle_data::<Group>(handle);
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; EVENTS];
    let n = libc::epoll_wait((*group).epfd, events.as_mut_ptr(), EVENTS as c_int, 0);
    // Only EINTR can fail a wait on our own set: the loop calls back while it stays ready.
    if n < 0 {
        return;
    }
    let mut sent = false;
    for event in &events[..n as usize] {
        // A pump stopped by an earlier read's JavaScript is still live (it goes with its close
        // callbacks, after this turn's polls) and says it is stopped.
        sent |= socket_pump::on_member_ready(event.u64 as *mut Pump);
    }
    if !sent {
        return;
    }
    let now = Instant::now();
    let close = (*group)
        .last_sends
        .is_some_and(|at| now.duration_since(at) < HOLD);
    (*group).last_sends = Some(now);
    if close && (*group).members > 0 {
        // Stopping a poll handle takes its descriptor out of the loop's epoll set too.
        uv::uv_poll_stop((*group).handle);
        (*group).holding = true;
        uv::uv_timer_start((*group).timer, on_held, HOLD.as_millis() as u64, 0);
    }
}

unsafe extern "C" fn on_held(timer: *mut c_void) {
    let group = uv::handle_data::<Group>(timer);
    (*group).holding = false;
    if (*group).members > 0 {
        uv::uv_poll_start((*group).handle, uv::UV_READABLE, on_ready);
    }
}

unsafe extern "C" fn on_env_cleanup(arg: *mut c_void) {
    let group = arg.cast::<Group>();
    GROUP.set(ptr::null_mut());
    uv::uv_close((*group).handle, on_closed);
    uv::uv_close((*group).timer, on_closed);
}

unsafe extern "C" fn on_closed(handle: *mut c_void) {
    let group = uv::handle_data::<Group>(handle);
    if uv::free_closed(handle, (*group).handle, &mut (*group).open) {
        let group = Box::from_raw(group);
        libc::close(group.epfd);
    }
}
