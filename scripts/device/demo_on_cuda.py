"""The demo model served on CUDA, as a user's program would be (scripts/device/gpu_check.sh
runs it under `opsight run`): 8 requests, each tokenize -> infer -> postprocess."""

import torch

from opsight.demo.model import factory


def main() -> None:
    model, inputs = factory()
    model = model.cuda().eval()
    inputs = tuple(x.cuda() for x in (inputs if isinstance(inputs, tuple) else (inputs,)))
    with torch.no_grad():
        for _ in range(8):
            model(*inputs)
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
