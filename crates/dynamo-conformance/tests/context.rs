//! The request context as an engine and a caller see it.

use std::time::Duration;

use dynamo_conformance::Context;

#[test]
fn a_new_context_is_running_and_keeps_its_id() {
    let ctx = Context::new("req-1");
    assert_eq!(ctx.id(), "req-1");
    assert!(!ctx.is_stopped());
    assert!(!ctx.is_killed());
}

#[test]
fn clones_observe_a_stop_made_through_any_of_them() {
    let ctx = Context::new("req");
    let engine_side = ctx.clone();
    ctx.stop_generating();
    assert!(engine_side.is_stopped());
    assert!(!engine_side.is_killed(), "a stop is not a kill");
}

#[test]
fn kill_implies_stopped() {
    let ctx = Context::new("req");
    ctx.kill();
    assert!(ctx.is_killed());
    assert!(ctx.is_stopped());
}

#[tokio::test]
async fn stopped_resolves_at_once_for_a_stop_that_came_first() {
    let ctx = Context::new("req");
    ctx.stop_generating();
    tokio::time::timeout(Duration::from_millis(100), ctx.stopped())
        .await
        .expect("an earlier stop is not missed");
}

#[tokio::test]
async fn stopped_stays_pending_while_the_request_runs() {
    let ctx = Context::new("req");
    assert!(
        tokio::time::timeout(Duration::from_millis(20), ctx.stopped())
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_wakes_every_waiter_when_another_task_stops_or_kills() {
    for kill in [false, true] {
        let ctx = Context::new("req");
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let ctx = ctx.clone();
                tokio::spawn(async move { ctx.stopped().await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(10)).await;
        if kill {
            ctx.kill();
        } else {
            ctx.stop_generating();
        }
        for waiter in waiters {
            tokio::time::timeout(Duration::from_secs(1), waiter)
                .await
                .expect("waiter woke")
                .expect("waiter did not panic");
        }
    }
}

#[test]
fn debug_output_shows_the_state_not_the_internals() {
    let ctx = Context::new("req-9");
    ctx.kill();
    assert_eq!(
        format!("{ctx:?}"),
        r#"Context { id: "req-9", stopped: true, killed: true }"#
    );
}
