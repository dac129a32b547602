#!/usr/bin/env python3
"""Seeds the decode_frame fuzz corpus with the shared test vectors.

Usage: fuzz/seed.py SPEC_DIR

Reads SPEC_DIR/vectors/{9p2000,9p2000u,9p2000L}.json and writes one file per
vector into fuzz/corpus/decode_frame/: a dialect selector byte (0 for 9P2000,
1 for 9P2000.u, 2 for 9P2000.L, as the target reads it) and the frame. Then
the examples of docs/streams.md, with selector 5 (9P2000.L with the stream
extension).
"""

import json
import pathlib
import re
import sys

FILES = [("9p2000.json", 0), ("9p2000u.json", 1), ("9p2000L.json", 2)]


def main(argv):
    if len(argv) != 2:
        sys.exit(f"usage: {argv[0]} SPEC_DIR")
    spec = pathlib.Path(argv[1])
    vectors = spec / "vectors" if (spec / "vectors").is_dir() else spec
    out = pathlib.Path(__file__).resolve().parent / "corpus" / "decode_frame"
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for file, selector in FILES:
        with open(vectors / file, encoding="utf-8") as f:
            doc = json.load(f)
        stem = file.removesuffix(".json")
        for i, vector in enumerate(doc["vectors"]):
            frame = bytes.fromhex(vector["hex"])
            label = re.sub(r"[^A-Za-z0-9_.-]", "_", vector.get("name", ""))
            path = out / f"{stem}-{i:03d}-{label}"
            path.write_bytes(bytes([selector]) + frame)
            written += 1
    doc = pathlib.Path(__file__).resolve().parent.parent / "docs" / "streams.md"
    examples = doc.read_text(encoding="utf-8").split("## Examples")[1]
    lines = [line.strip() for line in examples.splitlines() if line.strip()]
    for i, (hexline, text) in enumerate(zip(lines[0::2], lines[1::2])):
        frame = bytes.fromhex(hexline.replace(" ", ""))
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", text.split(" tag ")[0])
        (out / f"streams-{i:03d}-{name}").write_bytes(bytes([5]) + frame)
        written += 1
    print(f"seed: wrote {written} seeds to {out}")


if __name__ == "__main__":
    main(sys.argv)
