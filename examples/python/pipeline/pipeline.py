"""An inference pipeline in five phases, for the per-inference breakdown and for comparing
runs (docs/analysis.md): each of 60 inferences runs preprocess, host_to_device, compute,
device_to_host and postprocess (busy-waits standing in for real work).

PIPELINE_SLOWDOWN=1.2 makes compute 20% slower (a planted regression for opsight compare).
"""
import os
import time

SLOWDOWN = float(os.environ.get("PIPELINE_SLOWDOWN", "1"))
INFERENCES = int(os.environ.get("PIPELINE_INFERENCES", "60"))


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def preprocess(i):
    spin(0.0003 + 0.00005 * (i % 4))


def host_to_device(i):
    spin(0.0001)


def compute(i):
    spin(0.001 * SLOWDOWN)


def device_to_host(i):
    spin(0.00005)


def postprocess(i):
    if i % 2 == 0:
        spin(0.0002)


def infer(i):
    preprocess(i)
    host_to_device(i)
    compute(i)
    device_to_host(i)
    postprocess(i)


if __name__ == "__main__":
    for index in range(INFERENCES):
        infer(index)
