# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""The models of bench/torch: torchvision's own, built the same way by the
ranks (worker.py) and by the profiler (python3 -m mercury.torch profile
--model bench/torch/models.py:NAME), so that the simulator is fed the
model that was timed."""
import torch
import torchvision

CLASSES = 10


def resnet18():
    return torchvision.models.resnet18(num_classes=CLASSES)


def vgg11():
    """torchvision's vgg11 features with the small classifier of the usual
    CIFAR variant (512 -> 512 -> 512 -> 10). Stock vgg11's classifier
    (25088 -> 4096 -> 4096) is 123 M of its 133 M parameters: 0.5 GB of
    gradients a step, 40 s at 100 Mbit/s, which no CPU batch a 2-core
    machine can compute in comparable time would balance. No dropout, so
    that every scheme draws the same random numbers."""
    m = torchvision.models.vgg11(num_classes=CLASSES)
    m.avgpool = torch.nn.AdaptiveAvgPool2d(1)
    m.classifier = torch.nn.Sequential(
        torch.nn.Linear(512, 512), torch.nn.ReLU(inplace=True),
        torch.nn.Linear(512, 512), torch.nn.ReLU(inplace=True),
        torch.nn.Linear(512, CLASSES))
    return m


def tiny():
    """A few-layer CNN for BT_QUICK=1: it proves the plumbing of every
    scheme in seconds; its times say nothing about the real models."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(),
        torch.nn.Linear(32 * 16, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, CLASSES))


MODELS = {"resnet18": resnet18, "vgg11": vgg11, "tiny": tiny}
