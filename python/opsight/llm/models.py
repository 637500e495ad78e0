"""Small random-weight causal language models built from configs (nothing downloaded), for
tests, the demo and ``opsight bench --generate random:gpt2``; and a word-level stand-in
tokenizer for them (there is no trained vocabulary to load)."""

from __future__ import annotations

import zlib
from typing import Any

#: ``random:NAME`` models: their config classes and keyword arguments (tiny on purpose:
#: a step costs well under a millisecond on one CPU core).
RANDOM_MODELS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel",
             dict(vocab_size=512, n_positions=1024, n_embd=64, n_layer=2, n_head=2,
                  bos_token_id=0, eos_token_id=1, pad_token_id=1)),
    "llama": ("LlamaConfig", "LlamaForCausalLM",
              dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                   bos_token_id=0, eos_token_id=1, pad_token_id=1)),
}


def random_model(name: str = "gpt2", seed: int = 0, **overrides: Any) -> Any:
    """A random-weight ``transformers`` causal LM (``gpt2`` or ``llama``), in eval mode,
    named ``random-NAME`` (its ``name_or_path``)."""
    import torch
    import transformers

    if name not in RANDOM_MODELS:
        raise ValueError(f"random model {name!r}: expected one of {', '.join(RANDOM_MODELS)}")
    config_class, model_class, options = RANDOM_MODELS[name]
    config = getattr(transformers, config_class)(**{**options, **overrides})
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(config).eval()
    model.name_or_path = f"random-{name}"
    model.generation_config.pad_token_id = config.pad_token_id
    return model


def to_device(model: Any, device: str) -> Any:
    """``model`` moved to ``device`` (``cpu``, ``cuda``, ``cuda:1``...); a clear ValueError
    when torch cannot use that device here."""
    import torch

    try:
        target = torch.device(device)
    except (RuntimeError, ValueError) as error:
        raise ValueError(f"--device {device!r}: {error}") from None
    if target.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: torch sees no CUDA device here "
                         "(torch.cuda.is_available() is False)")
    return model.to(target)


class WordTokenizer:
    """Text to token ids and back without a vocabulary: a word is one token (its CRC32
    modulo the vocabulary, above the special ids); an id decodes to ``" t<ID>"``. Enough to
    give a random-weight model prompts of a chosen length and to stream one token a chunk."""

    def __init__(self, vocab_size: int, reserved: int = 2) -> None:
        self.vocab_size = vocab_size
        self.reserved = reserved

    def encode(self, text: str) -> list[int]:
        span = self.vocab_size - self.reserved
        return [self.reserved + zlib.crc32(word.encode()) % span for word in text.split()] or \
            [self.reserved]

    def decode(self, token: int) -> str:
        return f" t{int(token)}"
