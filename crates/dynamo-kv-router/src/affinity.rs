//! Stock Dynamo 1.6.1's session-affinity replica update: what a frontend publishes on each worker
//! endpoint's `session_affinity_events` when it binds a session, so its peers bind it the same
//! way. A msgpack map with named fields, inside the usual [`Envelope`].

use serde::{Deserialize, Serialize};

use crate::Envelope;

/// The topic of session-affinity replica updates.
pub const SESSION_AFFINITY_TOPIC: &str = "session_affinity_events";

/// One binding as a replica publishes it. `(sequence, writer_id)` orders versions of a binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionAffinityUpdate {
    pub session_id: String,
    pub worker_id: u64,
    /// None for a binding to the worker, not to one of its ranks.
    pub dp_rank: Option<u32>,
    pub sequence: u64,
    /// The publishing frontend's discovery instance id.
    pub writer_id: u64,
}

impl SessionAffinityUpdate {
    /// The update as publication `sequence` of `publisher_id`, at `now_ms`.
    pub fn envelope(&self, publisher_id: u64, sequence: u64, now_ms: u64) -> Envelope {
        Envelope {
            publisher_id,
            sequence,
            published_at: now_ms,
            topic: SESSION_AFFINITY_TOPIC.into(),
            payload: rmp_serde::to_vec_named(self).expect("an affinity update always encodes"),
        }
    }

    /// The error names what did not match stock's update.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        rmp_serde::from_slice(bytes).map_err(|e| {
            format!("not a session affinity update (msgpack session_id, worker_id, dp_rank, sequence, writer_id): {e}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_an_envelope_with_named_fields() {
        let update = SessionAffinityUpdate {
            session_id: "chat-1".into(),
            worker_id: u64::MAX - 3,
            dp_rank: None,
            sequence: 1_795_000_000_000_000_000,
            writer_id: 42,
        };
        let bytes = update.envelope(7, 3, 1000).encode();
        let envelope = Envelope::decode(&bytes).unwrap();
        assert_eq!(envelope.topic, SESSION_AFFINITY_TOPIC);
        assert_eq!(
            SessionAffinityUpdate::decode(&envelope.payload).unwrap(),
            update
        );
        // Named fields: the keys are in the payload, as stock's serde writes them.
        let text = String::from_utf8_lossy(&envelope.payload);
        for key in [
            "session_id",
            "worker_id",
            "dp_rank",
            "sequence",
            "writer_id",
        ] {
            assert!(text.contains(key), "{key}");
        }
    }

    #[test]
    fn names_what_is_wrong_with_a_bad_payload() {
        let err = SessionAffinityUpdate::decode(&[0x81, 0xa1, b'x', 0x01]).unwrap_err();
        assert!(err.starts_with("not a session affinity update"), "{err}");
    }
}
