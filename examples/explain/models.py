"""The explain zoo's models (zoo.yaml): real architectures from `transformers`, built from
tiny configs with random weights (nothing is downloaded), and one model known to break.

Each factory returns (model, example_inputs) as `opsight explain` expects; inputs are
seeded so that every run explains the same thing.
"""

from __future__ import annotations

import torch

_TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)


def _transformers():
    """transformers, or an error that says how to get it."""
    try:
        import transformers
    except ImportError:
        raise ImportError("the zoo's models need transformers: pip install transformers==5.23.0 "
                          "(pinned in requirements/test.txt)") from None
    return transformers


def _seeded() -> torch.Generator:
    torch.manual_seed(0)
    return torch.Generator().manual_seed(0)


def bert():
    """Encoder: BERT, 2 layers, hidden 32."""
    transformers, generator = _transformers(), _seeded()
    config = transformers.BertConfig(vocab_size=128, max_position_embeddings=64, **_TINY)
    input_ids = torch.randint(0, 128, (2, 16), generator=generator)
    return (transformers.BertModel(config),
            {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)})


def gpt2():
    """Decoder: GPT-2, 2 layers, embedding 32."""
    transformers, generator = _transformers(), _seeded()
    config = transformers.GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=2,
                                     n_head=2, use_cache=False, bos_token_id=0, eos_token_id=0)
    return (transformers.GPT2LMHeadModel(config),
            {"input_ids": torch.randint(0, 128, (2, 16), generator=generator)})


def t5():
    """Encoder-decoder: T5, 2+2 layers, d_model 32."""
    transformers, generator = _transformers(), _seeded()
    config = transformers.T5Config(vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                                   num_decoder_layers=2, num_heads=2, use_cache=False)
    return (transformers.T5Model(config),
            {"input_ids": torch.randint(0, 128, (2, 16), generator=generator),
             "decoder_input_ids": torch.randint(0, 128, (2, 8), generator=generator)})


def vit():
    """Vision transformer: ViT, 32x32 images in 8x8 patches, 2 layers."""
    transformers, generator = _transformers(), _seeded()
    config = transformers.ViTConfig(image_size=32, patch_size=8, num_channels=3, **_TINY)
    return (transformers.ViTModel(config),
            {"pixel_values": torch.randn(2, 3, 32, 32, generator=generator)})


def whisper():
    """Audio encoder-decoder: Whisper, 2+2 layers, 16 mel bins, 64 frames."""
    transformers, generator = _transformers(), _seeded()
    config = transformers.WhisperConfig(
        vocab_size=128, num_mel_bins=16, d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_source_positions=32, max_target_positions=32, use_cache=False,
        pad_token_id=0, bos_token_id=0, eos_token_id=0, decoder_start_token_id=0)
    return (transformers.WhisperModel(config),
            {"input_features": torch.randn(1, 16, 64, generator=generator),
             "decoder_input_ids": torch.randint(0, 128, (1, 8), generator=generator)})


def resnet():
    """Convolutional: ResNet (transformers' ResNetConfig), 2 stages of 1 basic block."""
    transformers, generator = _transformers(), _seeded()
    config = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                       layer_type="basic")
    return (transformers.ResNetModel(config),
            {"pixel_values": torch.randn(2, 3, 32, 32, generator=generator)})


class EarlyExit(torch.nn.Module):
    """Known to break: a data-dependent branch through `.item()`, and a print. Each costs a
    graph break in torch.compile."""

    def __init__(self) -> None:
        super().__init__()
        self.encode = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU())
        self.deep = torch.nn.Linear(32, 32)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.encode(x)
        confidence = hidden.abs().mean().item()
        if confidence > 0.1:
            hidden = self.deep(hidden)
        print(f"confidence {confidence:.3f}")
        return self.head(hidden)


def early_exit():
    generator = _seeded()
    return EarlyExit(), (torch.randn(4, 16, generator=generator),)
