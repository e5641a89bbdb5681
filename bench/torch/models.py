# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
"""The models of bench/torch: torchvision's own (its VisionTransformer
made to take any image size), built the same way by the ranks
(worker.py) and by the profiler (python3 -m mercury.torch profile
--model bench/torch/models.py:NAME), so that the simulator is fed the
model that was timed."""
import torch
import torchvision
from torchvision.models import vision_transformer

CLASSES = 10
# ViT's patch side. run.sh's size rule rounds every size to 32 px
# (report.py's balanced_size), which a patch of 16 divides: the image is
# cut into whole patches at any size the rule picks.
VIT_PATCH = 16


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


class _AnySizeEncoder(vision_transformer.Encoder):
    """torchvision's ViT encoder with its position embedding resized
    (bicubic) to the input's patch grid, as timm's dynamic_img_size does:
    torchvision's own accepts only the image size it was built for, and
    a model built per size would have as many parameters as that size
    has patches, so the wire time the size rule balances would move with
    the size it chooses."""

    def forward(self, input):
        pos = self.pos_embedding
        if input.shape[1] != pos.shape[1]:
            g0 = round((pos.shape[1] - 1) ** 0.5)
            g = round((input.shape[1] - 1) ** 0.5)
            torch._assert(g * g == input.shape[1] - 1,
                          "vit: a square image is expected")
            grid = pos[:, 1:].reshape(1, g0, g0, -1).permute(0, 3, 1, 2)
            grid = torch.nn.functional.interpolate(
                grid, size=(g, g), mode="bicubic", align_corners=False)
            pos = torch.cat([pos[:, :1],
                             grid.permute(0, 2, 3, 1).reshape(1, g * g, -1)], 1)
        return self.ln(self.layers(self.dropout(input + pos)))


class _AnySizeViT(torchvision.models.VisionTransformer):
    """torchvision's VisionTransformer on any square image whose side is
    a multiple of the patch (keyword arguments only)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        # the same encoder, made by the same constructor (and its
        # initialisation), but accepting any grid
        self.encoder = _AnySizeEncoder(
            self.seq_length, kw["num_layers"], kw["num_heads"],
            self.hidden_dim, self.mlp_dim, self.dropout,
            self.attention_dropout, self.norm_layer)

    def _process_input(self, x):
        n, _, h, w = x.shape
        torch._assert(h % self.patch_size == 0 and w % self.patch_size == 0,
                      "vit: the image side must be a multiple of the patch")
        x = self.conv_proj(x)
        return x.reshape(n, self.hidden_dim, -1).permute(0, 2, 1)


def vit():
    """A small vision transformer (torchvision's VisionTransformer: patch
    16, 6 layers, hidden 256, 4 heads, MLP 1024): 5.0 M parameters, 20 MB
    of gradients, 5.3 s a step on the 30 Mbit/s link, another family than
    the CNNs (self-attention and MLP blocks, LayerNorm, no BatchNorm). It
    takes any square image whose side is a multiple of 16 (position
    embedding resized from 224 px's 14 x 14 grid), so that the worker's
    3 x S x S input and the size rule work as for the CNNs. No dropout,
    as vgg11."""
    return _AnySizeViT(image_size=224, patch_size=VIT_PATCH, num_layers=6,
                       num_heads=4, hidden_dim=256, mlp_dim=1024,
                       num_classes=CLASSES)


def tiny():
    """A few-layer CNN for BT_QUICK=1: it proves the plumbing of every
    scheme in seconds; its times say nothing about the real models."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(),
        torch.nn.Linear(32 * 16, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, CLASSES))


MODELS = {"resnet18": resnet18, "vgg11": vgg11, "vit": vit, "tiny": tiny}
