"""Reading plain-text inputs in blocks: the same lines as reading line by line."""

import pytest

from data import text_files
from tasks.pretraining import writer

CONTENT = ("héllo wörld\r\n\n\nxyz€ end\n".encode("utf-8") * 5 + b"bad \xff\xfe bytes\n"
           + "tail without newline ½".encode("utf-8"))


@pytest.mark.parametrize("block_bytes", [1, 2, 3, 7, 64, 1 << 20])
def test_lines_are_the_same_whatever_the_block_size(tmp_path, monkeypatch, block_bytes):
  path = tmp_path / "input.txt"
  path.write_bytes(CONTENT)
  monkeypatch.setattr(text_files, "_BLOCK_BYTES", block_bytes)
  stats = text_files.DecodeStats()
  lines = list(text_files.read_lines(str(path), stats))
  expected = [line.decode("utf-8", "replace").rstrip("\r")
              for line in CONTENT.split(b"\n")]
  assert lines == expected
  assert lines[-2] == "bad \ufffd\ufffd bytes" and lines[-1] == "tail without newline ½"
  assert (stats.lines, stats.undecodable_lines) == (22, 1)
  # Progress counts file bytes, not the decoded text's (longer by U+FFFD, shorter by "\r").
  assert stats.bytes == len(CONTENT)
  list(text_files.read_lines(str(path), stats))
  assert stats.bytes == 2 * len(CONTENT)


@pytest.mark.parametrize("block_bytes", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("content, problem", [
    (CONTENT, "not UTF-8 text at line 21 (invalid start byte at byte 144)"),
    # A truncated sequence at the end of the file; a file that decodes.
    ("ok\n½".encode("utf-8")[:-1], "not UTF-8 text at line 2 (unexpected end of data at byte 3)"),
    ("ok\n½".encode("utf-8"), "not UTF-8 text"),
])
def test_the_first_undecodable_byte_is_named_by_line_and_offset_in_the_file(
    tmp_path, monkeypatch, block_bytes, content, problem):
  path = tmp_path / "input.txt"
  path.write_bytes(content)
  monkeypatch.setattr(text_files, "_BLOCK_BYTES", block_bytes)
  assert text_files.undecodable_problem(str(path)) == problem


def test_a_progress_line_stays_at_most_100_percent_on_undecodable_input(tmp_path):
  path = tmp_path / "latin1.txt"
  path.write_bytes(("caf\xe9 " * 200 + "\n\n").encode("latin-1") * 20)
  stats = text_files.DecodeStats()
  covered = sum(num_bytes for _, num_bytes
                in writer.read_document_shards([str(path)], 3, stats))
  assert covered == path.stat().st_size and stats.undecodable_lines == 20


def test_a_final_newline_adds_no_line_and_an_empty_file_has_none(tmp_path):
  path = tmp_path / "input.txt"
  path.write_bytes(b"one\ntwo\n")
  assert list(text_files.read_lines(str(path))) == ["one", "two"]
  path.write_bytes(b"")
  assert list(text_files.read_lines(str(path))) == []
