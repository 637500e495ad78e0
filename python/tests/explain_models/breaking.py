"""Small models for the explain tests: one that breaks twice (a data-dependent branch through
.item() and a print), one that does not, and factories that fail in the ways a zoo must
survive (raise, crash the process, hang, return the wrong thing)."""

import os
import time

import torch

ITEM_LINE = 22   # the .item() line below, which the tests expect in the break sites
PRINT_LINE = 24  # the print


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(8, 8)
        self.second = torch.nn.Linear(8, 8)

    def forward(self, x):
        hidden = torch.relu(self.first(x))
        if hidden.sum().item() > 0:
            hidden = hidden * 2
        print("branchy")
        return self.second(hidden)


def branchy():
    torch.manual_seed(0)
    return Branchy(), (torch.randn(2, 8),)


def plain():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), (torch.randn(2, 8),)


def raises():
    raise RuntimeError("the weights are missing")


def crashes():
    os.abort()


def hangs():
    time.sleep(3600)


def not_a_pair():
    return torch.nn.Linear(2, 2)
