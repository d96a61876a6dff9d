"""What the official OpenAI Python SDK sees from a Dynamo frontend, as one JSON report.

Usage: python openai_client.py BASE_URL CONFIG_JSON

CONFIG_JSON names the model (and its embedding model), the chat messages to send, and a victim worker (its model and pid)
to SIGKILL once its stream has started. Every call goes through the real `openai` client; the
report holds what the client returned or raised, and test/clients/openai-python.test.ts checks it.
"""

import json
import os
import signal
import sys

import openai


def error_of(call):
    """The exception a call raises, described."""
    try:
        call()
    except openai.APIError as err:  # every SDK error, HTTP or stream
        return {"class": type(err).__name__, "message": err.message, "param": getattr(err, "param", None), "status": getattr(err, "status_code", None)}
    return None


def main():
    base_url, config = sys.argv[1], json.loads(sys.argv[2])
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0)
    model, messages = config["model"], config["messages"]
    report = {}

    chat = dict(model=model, messages=messages, max_tokens=12, temperature=0)
    whole = client.chat.completions.create(**chat)
    report["chat"] = {"content": whole.choices[0].message.content, "finish": whole.choices[0].finish_reason, "usage": whole.usage.model_dump(exclude_none=True)}
    text, finish, usage = "", None, None
    for chunk in client.chat.completions.create(**chat, stream=True, stream_options={"include_usage": True}):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage.model_dump(exclude_none=True)
    report["chat_stream"] = {"content": text, "finish": finish, "usage": usage}

    completion = dict(model=model, prompt="The capital of France is", max_tokens=8, temperature=0)
    report["completion"] = client.completions.create(**completion).choices[0].text
    report["completion_stream"] = "".join(c.choices[0].text for c in client.completions.create(**completion, stream=True) if c.choices)

    report["not_found"] = error_of(lambda: client.chat.completions.create(**{**chat, "model": f"{model}-nope"}))
    report["bad_request"] = error_of(lambda: client.chat.completions.create(**{**chat, "temperature": "hot"}))

    def failing_stream():
        # min_tokens (keeping the victim busy) is an extension: it goes in the SDK's extra_body.
        body = dict(config["victim_body"])
        extra = {"min_tokens": body.pop("min_tokens")}
        stream = client.chat.completions.create(**body, extra_body=extra)
        for i, chunk in enumerate(stream):
            if i == 0:
                os.kill(config["victim_pid"], signal.SIGKILL)

    report["mid_stream"] = error_of(failing_stream)

    n3 = dict(model=model, messages=messages, max_tokens=8, n=3, temperature=0.8, seed=7)
    whole = client.chat.completions.create(**n3)
    report["n3"] = {"indices": [c.index for c in whole.choices], "texts": [c.message.content for c in whole.choices]}
    texts = ["", "", ""]
    for chunk in client.chat.completions.create(**n3, stream=True):
        for c in chunk.choices:
            texts[c.index] += c.delta.content or ""
    report["n3_stream"] = texts

    lp = client.chat.completions.create(**{**chat, "max_tokens": 6}, logprobs=True, top_logprobs=3)
    report["logprobs"] = [
        {"token": e.token, "logprob": e.logprob, "bytes": e.bytes, "top": [t.logprob for t in e.top_logprobs]} for e in lp.choices[0].logprobs.content
    ]
    report["logprobs_usage"] = lp.usage.completion_tokens

    batch = client.completions.create(model=model, prompt=["The sky is", "Water is"], n=2, max_tokens=4, temperature=0.7, seed=3)
    report["batch"] = {"indices": [c.index for c in batch.choices], "completion_tokens": batch.usage.completion_tokens}

    plain = client.completions.create(**{**completion, "max_tokens": 4}).choices[0].text
    echoed = client.completions.create(**{**completion, "max_tokens": 4}, echo=True).choices[0].text
    report["echo"] = {"plain": plain, "echoed": echoed}

    inputs = ["The cat sat on the mat.", "Quarterly revenue rose by four percent."]
    # The SDK asks for base64 unless told otherwise, and decodes it.
    b64 = client.embeddings.create(model=config["embed_model"], input=inputs)
    floats = client.embeddings.create(model=config["embed_model"], input=inputs, encoding_format="float")
    report["embeddings"] = {
        "base64": [list(map(float, d.embedding)) for d in b64.data],
        "float": [d.embedding for d in floats.data],
        "prompt_tokens": floats.usage.prompt_tokens,
    }

    instructions = config.get("instructions")
    ask = dict(model=model, input="What is the capital of France?", temperature=0, max_output_tokens=12)
    if instructions:
        ask["instructions"] = instructions
    whole = client.responses.create(**ask)
    streamed, final = "", None
    for event in client.responses.create(**ask, stream=True):
        if event.type == "response.output_text.delta":
            streamed += event.delta
        if event.type in ("response.completed", "response.incomplete"):
            final = event.response.output_text
    report["responses"] = {"whole": whole.output_text, "streamed": streamed, "final": final}

    if config.get("tool_round_trip"):
        tools = [{"type": "function", "name": "get_weather", "description": "Get the weather of a city", "strict": True,
                  "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"], "additionalProperties": False}}]
        ask = dict(model=model, instructions=instructions, temperature=0, max_output_tokens=60, tools=tools)
        first = client.responses.create(**ask, input="What is the weather in Paris?", tool_choice={"type": "function", "name": "get_weather"})
        call = next(o for o in first.output if o.type == "function_call")
        second = client.responses.create(**ask, input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": '{"temperature_c": 21, "sky": "sunny"}'},
        ])
        report["tool_round_trip"] = {"name": call.name, "arguments": json.loads(call.arguments), "answer": second.output_text}

    print(json.dumps(report))


if __name__ == "__main__":
    main()
