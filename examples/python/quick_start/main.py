"""HiQ's quick start, traced by opsight without a line of tracing code:

    opsight run -c examples/python/quick_start/targets.yaml -- python examples/python/quick_start/main.py

main() calls func1() twice; func1() sleeps 100 ms and calls func2(), which sleeps 150 ms.
The targets file names the three functions; opsight prints the call tree with each one's
latency and the tracer's own overhead.
"""

import time


def func2():
    time.sleep(0.15)


def func1():
    time.sleep(0.1)
    func2()


def main():
    for _ in range(2):
        func1()


if __name__ == "__main__":
    main()
