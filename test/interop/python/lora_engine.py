# A stock Dynamo 1.6.1 unified-backend worker with simulated LoRA adapters, to put a stock worker
# with adapters behind our frontend. Stock 1.6.1 ships no CPU engine with LoRA, but its Rust Worker
# forwards the worker's /v1/loras (with DYN_LORA_ENABLED=true and DYN_SYSTEM_PORT set) to the
# engine updates load_lora / unload_lora / list_loras of any engine that advertises them. This one
# extends the stock SampleLLMEngine with those updates: loading an adapter publishes its model card
# with stock's own register_model(lora_name=..., base_model_path=...), as a real LoRA backend does.
#
# Usage: python lora_engine.py <SampleLLMEngine flags: --model-name <model dir> --component ...>
# Prints "REQUEST <context id> <json>" with the `model` and `routing` of each request it gets.
# An adapter's output is the base output with every token id shifted by lora_name_to_id(name) % 1000,
# so a client can tell which adapter answered.
import json

from dynamo.common.backend.run import run
from dynamo.common.backend.sample_engine import SampleLLMEngine
from dynamo.llm import ModelInput, ModelType, WorkerType, lora_name_to_id, register_model, unregister_model


class LoraSampleEngine(SampleLLMEngine):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._endpoint = None
        self._adapters: dict[str, int] = {}

    def supported_updates(self) -> set[str]:
        return {"load_lora", "unload_lora", "list_loras"}

    async def on_endpoint_ready(self, endpoint) -> None:
        # The adapters' cards are published for the endpoint the worker serves.
        self._endpoint = endpoint

    async def engine_update(self, update: str, body: dict) -> dict:
        name = body.get("lora_name")
        if update == "list_loras":
            return {"status": "success", "loras": dict(self._adapters), "count": len(self._adapters)}
        if not isinstance(name, str) or not name:
            return {"status": "error", "message": "'lora_name' is required and must be a string"}
        if update == "load_lora":
            # The sample engine's model name is the model folder: the adapter reuses its files.
            await register_model(
                ModelInput.Tokens,
                ModelType.Chat | ModelType.Completions,
                self._endpoint,
                self.model_name,
                worker_type=WorkerType.Aggregated,
                needs=[],
                lora_name=name,
                base_model_path=self.model_name,
            )
            self._adapters[name] = lora_name_to_id(name)
            return {"status": "success", "message": f"LoRA adapter '{name}' loaded successfully", "lora_name": name, "lora_id": self._adapters[name]}
        if name not in self._adapters:
            return {"status": "error", "message": f"LoRA adapter '{name}' not found. Available LoRAs: {sorted(self._adapters)}"}
        await unregister_model(self._endpoint, lora_name=name)
        lora_id = self._adapters.pop(name)
        return {"status": "success", "message": f"LoRA adapter '{name}' unloaded successfully", "lora_name": name, "lora_id": lora_id}

    async def generate(self, request, context):
        print(f"REQUEST {context.id()} {json.dumps({'model': request.get('model'), 'routing': request.get('routing')})}", flush=True)
        shift = self._adapters.get(request.get("model"), 0) % 1000
        async for chunk in super().generate(request, context):
            chunk["token_ids"] = [token + shift for token in chunk["token_ids"]]
            yield chunk


if __name__ == "__main__":
    run(LoraSampleEngine)
