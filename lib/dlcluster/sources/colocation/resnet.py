"""ResNet-50 in plain PyTorch (torchvision has no CPU build here), plus a tiny variant for CI.

The architecture is the standard ResNet-50 v1.5 (He et al. 2016; stride in the
3x3 convolution of each bottleneck, as torchvision does): a 7x7 stem, four stages
of bottleneck blocks [3, 4, 6, 3] of widths 64..512 with expansion 4, global
average pooling and a 1000-way classifier -- 25,557,032 parameters. ``tiny``
keeps the same block structure at [1, 1, 1, 1] blocks, width 8, 10 classes and
32x32 inputs, so the benchmark's code path runs in seconds on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ModelSpec:
    layers: tuple[int, int, int, int]
    base_width: int
    num_classes: int
    image_size: int
    default_batch_size: int


MODELS = {
    "resnet50": ModelSpec(layers=(3, 4, 6, 3), base_width=64, num_classes=1000, image_size=224,
                          default_batch_size=64),
    "tiny": ModelSpec(layers=(1, 1, 1, 1), base_width=8, num_classes=10, image_size=32,
                      default_batch_size=8),
}


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carrying the stride), 1x1 expand by 4, plus a projected shortcut."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int):
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut = None
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(out_channels))

    def forward(self, x):
        identity = x if self.shortcut is None else self.shortcut(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        width = spec.base_width
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
        stages, in_channels = [], width
        for index, blocks in enumerate(spec.layers):
            stage_width = width * 2 ** index
            for block in range(blocks):
                stride = 2 if index > 0 and block == 0 else 1
                stages.append(Bottleneck(in_channels, stage_width, stride))
                in_channels = stage_width * Bottleneck.expansion
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, spec.num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


def build_model(name: str) -> ResNet:
    """A freshly initialised model by name (``resnet50`` or ``tiny``)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(MODELS)}")
    return ResNet(MODELS[name])
