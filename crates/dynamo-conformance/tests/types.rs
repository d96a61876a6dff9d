//! Wire shapes: Dynamo's field names, unknown keys kept, loose inputs accepted.

use dynamo_conformance::{
    CompletionUsage, EngineConfig, EngineError, EngineOutput, FinishReason, GenerateRequest,
    KvEventSource, KvEventSourceKind, LlmRegistration,
};
use serde_json::json;

#[test]
fn a_python_style_request_keeps_every_key_it_does_not_model() {
    let wire = json!({
        "model": "sample-model",
        "token_ids": [1, 2, 3],
        "stop_conditions": {"max_tokens": 4, "ignore_eos": true, "stop": ["\n"], "future_knob": 1},
        "sampling_options": {"temperature": 0.5},
        "routing": {"dp_rank": 1},
        "_HEALTH_CHECK": true
    });
    let request: GenerateRequest = serde_json::from_value(wire.clone()).unwrap();
    assert_eq!(request.model.as_deref(), Some("sample-model"));
    assert_eq!(request.token_ids, vec![1, 2, 3]);
    assert_eq!(request.stop_conditions.max_tokens, Some(4));
    assert_eq!(request.stop_conditions.ignore_eos, Some(true));
    assert_eq!(request.stop_conditions.stop, Some(vec!["\n".to_string()]));
    assert_eq!(request.stop_conditions.extra["future_knob"], json!(1));
    assert_eq!(request.sampling_options["temperature"], json!(0.5));
    assert!(request.output_options.is_empty());
    assert_eq!(request.extra["routing"], json!({"dp_rank": 1}));
    assert_eq!(request.extra["_HEALTH_CHECK"], json!(true));

    let back = serde_json::to_value(&request).unwrap();
    let mut expected = wire;
    expected["output_options"] = json!({});
    assert_eq!(back, expected);
}

#[test]
fn only_token_ids_is_required_and_nulls_read_as_empty() {
    let request: GenerateRequest = serde_json::from_value(json!({
        "token_ids": [7],
        "stop_conditions": null,
        "sampling_options": null,
        "output_options": null
    }))
    .unwrap();
    assert_eq!(
        request,
        GenerateRequest {
            token_ids: vec![7],
            ..GenerateRequest::default()
        }
    );

    let missing = serde_json::from_value::<GenerateRequest>(json!({"model": "m"})).unwrap_err();
    assert!(missing.to_string().contains("token_ids"), "{missing}");
}

#[test]
fn the_kit_request_has_the_standard_shape() {
    let request = GenerateRequest::new("m", vec![1, 2, 3], Some(8));
    assert_eq!(
        serde_json::to_value(&request).unwrap(),
        json!({
            "model": "m",
            "token_ids": [1, 2, 3],
            "stop_conditions": {"max_tokens": 8},
            "sampling_options": {},
            "output_options": {}
        })
    );
}

#[test]
fn chunks_keep_unknown_keys_and_accept_the_abort_alias() {
    let wire = json!({
        "token_ids": [],
        "index": 0,
        "finish_reason": "abort",
        "completion_usage": {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3},
        "log_probs": [-0.1],
        "engine_data": {"prompt_logprobs": null}
    });
    let chunk: EngineOutput = serde_json::from_value(wire).unwrap();
    assert_eq!(chunk.finish_reason, Some(FinishReason::Cancelled));
    assert!(chunk.is_terminal());
    assert_eq!(chunk.completion_usage, Some(CompletionUsage::new(3, 0)));
    assert_eq!(chunk.extra["log_probs"], json!([-0.1]));

    let back = serde_json::to_value(&chunk).unwrap();
    assert_eq!(back["finish_reason"], json!("cancelled"));
    assert_eq!(back["engine_data"], json!({"prompt_logprobs": null}));
}

#[test]
fn a_chunk_needs_token_ids_but_nothing_else() {
    let chunk: EngineOutput = serde_json::from_value(json!({"token_ids": [5]})).unwrap();
    assert_eq!(chunk.index, None);
    assert!(!chunk.is_terminal());
    assert_eq!(
        serde_json::to_value(&chunk).unwrap(),
        json!({"token_ids": [5]})
    );
    assert!(serde_json::from_value::<EngineOutput>(json!({"index": 0})).is_err());
}

#[test]
fn error_finish_reasons_are_objects_on_the_wire() {
    let chunk = EngineOutput::terminal(FinishReason::Error("boom".into()));
    let value = serde_json::to_value(&chunk).unwrap();
    assert_eq!(
        value,
        json!({"token_ids": [], "index": 0, "finish_reason": {"error": "boom"}})
    );
    assert_eq!(
        serde_json::from_value::<EngineOutput>(value).unwrap(),
        chunk
    );
}

#[test]
fn chunk_builders_produce_the_sample_engine_shapes() {
    assert_eq!(
        serde_json::to_value(EngineOutput::token(1)).unwrap(),
        json!({"token_ids": [1], "index": 0})
    );
    let cancelled = EngineOutput::cancelled().with_usage(CompletionUsage::new(3, 2));
    assert_eq!(
        serde_json::to_value(cancelled).unwrap(),
        json!({
            "token_ids": [],
            "index": 0,
            "finish_reason": "cancelled",
            "completion_usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        })
    );
}

#[test]
fn usage_total_saturates_instead_of_overflowing() {
    assert_eq!(CompletionUsage::new(u32::MAX, 1).total_tokens, u32::MAX);
}

#[test]
fn engine_config_defaults_and_omits_what_is_not_advertised() {
    let config: EngineConfig = serde_json::from_value(json!({"model": "m"})).unwrap();
    assert_eq!(config, EngineConfig::new("m"));
    assert_eq!(
        serde_json::to_value(&config).unwrap(),
        json!({"model": "m", "model_aliases": [], "runtime_data": {}})
    );

    let config: EngineConfig = serde_json::from_value(json!({
        "model": "m",
        "served_model_name": "served",
        "model_aliases": ["alias"],
        "runtime_data": {"k": 1},
        "llm": {"context_length": 2048, "kv_cache_block_size": 16, "total_kv_blocks": 1000,
                "bootstrap_host": "10.0.0.1", "bootstrap_port": 8998}
    }))
    .unwrap();
    let llm = config.llm.clone().unwrap();
    assert_eq!(
        llm,
        LlmRegistration {
            context_length: Some(2048),
            kv_cache_block_size: Some(16),
            total_kv_blocks: Some(1000),
            bootstrap_host: Some("10.0.0.1".into()),
            bootstrap_port: Some(8998),
            ..LlmRegistration::default()
        }
    );
    assert!(!llm.enable_eagle);
    assert_eq!(config.model_aliases, vec!["alias"]);
    let back = serde_json::to_value(&config).unwrap();
    assert_eq!(
        back["llm"].as_object().unwrap().len(),
        6,
        "Nones omitted, enable_eagle kept: {back}"
    );
}

#[test]
fn kv_event_sources_are_tagged_by_kind() {
    assert_eq!(
        serde_json::to_value(KvEventSource::zmq("tcp://127.0.0.1:5557", "", 0)).unwrap(),
        json!({"kind": "zmq", "endpoint": "tcp://127.0.0.1:5557", "topic": "", "dp_rank": 0})
    );
    assert_eq!(
        serde_json::to_value(KvEventSource::push(2)).unwrap(),
        json!({"kind": "push", "dp_rank": 2})
    );

    let zmq: KvEventSource =
        serde_json::from_value(json!({"kind": "zmq", "endpoint": "e"})).unwrap();
    assert_eq!(
        zmq.kind,
        KvEventSourceKind::Zmq {
            endpoint: "e".into(),
            topic: String::new()
        }
    );
    assert_eq!(zmq.dp_rank, 0);
    assert!(serde_json::from_value::<KvEventSource>(json!({"kind": "grpc"})).is_err());
}

#[test]
fn engine_errors_read_as_kind_then_message() {
    let error = EngineError::invalid_argument("stop_conditions.max_tokens must be ≥ 1, got -5");
    assert_eq!(
        error.to_string(),
        "InvalidArgument: stop_conditions.max_tokens must be ≥ 1, got -5"
    );
    assert_eq!(EngineError::unknown("x").kind, "Unknown");
}
