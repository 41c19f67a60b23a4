"""User files: one reader for text (:mod:`specframe.files.read`, YAML in :mod:`specframe.files.yaml_input`) and one
writer for outputs (:mod:`specframe.files.write`); the files the product keeps in its cache follow their own rule
(:mod:`specframe.files.cache`)."""

from specframe.files.read import MiB, decode_text, json_lines, parse_json, path_problem, read_bytes, read_text
from specframe.files.write import (
    OutputError,
    check_output_file,
    check_writable_dir,
    ensure_dir,
    umask_mode,
    write_all,
    write_bytes,
    write_text,
    write_with,
)
from specframe.files.yaml_input import parse_yaml

__all__ = [
    "MiB",
    "OutputError",
    "check_output_file",
    "check_writable_dir",
    "decode_text",
    "ensure_dir",
    "json_lines",
    "parse_json",
    "parse_yaml",
    "path_problem",
    "read_bytes",
    "read_text",
    "umask_mode",
    "write_all",
    "write_bytes",
    "write_text",
    "write_with",
]
