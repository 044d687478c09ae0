"""Files in and out: the one JSONL reader, atomic replacement of outputs, output-over-input
checks. Parquet lives in ``rewardsmith.files.parquet``; the digests of the files a reward reads
besides the rollout (``reads_files``) in ``rewardsmith.files.digests``."""

from __future__ import annotations

from .atomic import atomic_path, atomic_text, final_path
from .jsonl import JsonLine, parse_json_line, read_json_objects, read_jsonl
from .paths import refuse_output_over_input, same_file

__all__ = [
    "JsonLine",
    "atomic_path",
    "atomic_text",
    "final_path",
    "parse_json_line",
    "read_json_objects",
    "read_jsonl",
    "refuse_output_over_input",
    "same_file",
]
