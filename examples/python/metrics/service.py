"""A small request handler whose phases each stress one resource: it reads a model file
from disk, fetches features over a (loopback) socket, builds an embedding table in memory
and scores on the CPU. targets.yaml asks opsight for the metric that matters per phase."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time

MODEL_BYTES = 8 << 20
FEATURE_BYTES = 256 << 10


def load_model(path: str) -> int:
    with open(path, "rb") as file:
        return len(file.read())


def fetch_features(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as connection:
        connection.sendall(b"GET features\n")
        data = b""
        while len(data) < FEATURE_BYTES:
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def build_table(rows: int) -> list[bytearray]:
    return [bytearray(4096) for _ in range(rows)]


def score(features: bytes) -> int:
    until = time.thread_time() + 0.02
    total = 0
    while time.thread_time() < until:
        total += sum(features[:4096])
    return total


def handle(path: str, port: int) -> int:
    load_model(path)
    features = fetch_features(port)
    table = build_table(8192)
    result = score(features)
    del table
    return result


def feature_server(server: socket.socket) -> None:
    while True:
        try:
            connection, _ = server.accept()
        except OSError:
            return
        with connection:
            connection.recv(64)
            connection.sendall(b"f" * FEATURE_BYTES)


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.bin")
        with open(path, "wb") as file:
            file.write(os.urandom(MODEL_BYTES))
        server = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=feature_server, args=(server,), daemon=True).start()
        for _ in range(5):
            handle(path, server.getsockname()[1])
        server.close()


if __name__ == "__main__":
    main()
