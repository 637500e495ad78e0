"""A small BERT-style encoder in plain torch, with random weights: the demo's real model.

The layout follows BERT's (embeddings, ``encoder.layer.N.attention.self.query``...,
``pooler``, ``classifier``) so that module paths in a trace read like those of a
transformers model; nothing is downloaded. Sizes are chosen to run in milliseconds on a
laptop CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class TinyBertConfig:
    vocab_size: int = 8000
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 512
    max_positions: int = 128
    num_labels: int = 3


class Embeddings(nn.Module):
    def __init__(self, config: TinyBertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size)
        self.position_embeddings = nn.Embedding(config.max_positions, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        return self.LayerNorm(self.word_embeddings(input_ids) + self.position_embeddings(positions))


class SelfAttention(nn.Module):
    def __init__(self, config: TinyBertConfig) -> None:
        super().__init__()
        self.num_heads = config.num_heads
        self.head_size = config.hidden_size // config.num_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)

    def _heads(self, states: torch.Tensor) -> torch.Tensor:
        batch, length, _ = states.shape
        return states.view(batch, length, self.num_heads, self.head_size).transpose(1, 2)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        query, key, value = self._heads(self.query(states)), self._heads(self.key(states)), \
            self._heads(self.value(states))
        scores = query @ key.transpose(-1, -2) / math.sqrt(self.head_size) + mask
        context = torch.softmax(scores, dim=-1) @ value
        batch, _, length, _ = context.shape
        return context.transpose(1, 2).reshape(batch, length, -1)


class Attention(nn.Module):
    def __init__(self, config: TinyBertConfig) -> None:
        super().__init__()
        self.self = SelfAttention(config)
        self.output = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(states + self.output(self.self(states, mask)))


class Layer(nn.Module):
    def __init__(self, config: TinyBertConfig) -> None:
        super().__init__()
        self.attention = Attention(config)
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        attended = self.attention(states, mask)
        return self.LayerNorm(attended + self.output(torch.nn.functional.gelu(
            self.intermediate(attended))))


class Encoder(nn.Module):
    def __init__(self, config: TinyBertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(Layer(config) for _ in range(config.num_layers))

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            states = layer(states, mask)
        return states


class TinyBert(nn.Module):
    """input_ids [batch, length] (int64), attention_mask [batch, length] (1 = token) ->
    logits [batch, num_labels]."""

    def __init__(self, config: TinyBertConfig = TinyBertConfig()) -> None:
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config)
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -1e4
        states = self.encoder(self.embeddings(input_ids), mask)
        return self.classifier(torch.tanh(self.pooler(states[:, 0])))


def build(batch_size: int = 4, length: int = 64, seed: int = 0,
          config: TinyBertConfig = TinyBertConfig()) -> tuple[TinyBert, tuple[torch.Tensor, ...]]:
    """The model (eval mode, random weights from `seed`) and example inputs."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = TinyBert(config).eval()
    input_ids = torch.randint(0, config.vocab_size, (batch_size, length), generator=generator)
    attention_mask = torch.ones(batch_size, length, dtype=torch.int64)
    return model, (input_ids, attention_mask)


def factory():
    """``opsight bench opsight.demo.model:factory``: the model and example inputs."""
    return build()
