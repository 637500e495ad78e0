"""A frozen-backbone model for print_model's golden test: a convolutional backbone whose
parameters are frozen (three identical blocks, with BatchNorm buffers), a partly frozen
neck and a trainable float16 head."""

import torch


def block(channels: int) -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Conv2d(channels, channels, 3, padding=1),
                               torch.nn.BatchNorm2d(channels), torch.nn.ReLU())


class FrozenBackbone(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.backbone = torch.nn.Sequential(*(block(8) for _ in range(3)))
        self.neck = torch.nn.ModuleDict({"reduce": torch.nn.Linear(8, 8),
                                         "project": torch.nn.Linear(8, 8)})
        self.head = torch.nn.Linear(8, 4).to(torch.float16)
        for parameter in [*self.stem.parameters(), *self.backbone.parameters(),
                          *self.neck["reduce"].parameters()]:
            parameter.requires_grad_(False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.backbone(self.stem(images)).mean(dim=(2, 3))
        features = self.neck["project"](self.neck["reduce"](features))
        return self.head(features.to(torch.float16))


def frozen_backbone():
    torch.manual_seed(0)
    return FrozenBackbone(), (torch.randn(2, 3, 8, 8),)
