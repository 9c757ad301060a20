"""WikiText token files -> the original pretraining input format (sentence per line, documents).

WikiText marks each article with a ` = Title = ` line and sections with ` = = Section = = `; its
text is already word-tokenised (` @-@ ` for hyphens). Articles become documents, section headings
are dropped, and paragraphs are split into sentences after ` . `, ` ? ` and ` ! `.
"""

import re

_TITLE = re.compile(r"^ = [^=].* = $")
_HEADING = re.compile(r"^ (= )+.*( =)+ $")
_SENTENCE_END = re.compile(r"(?<= [.?!]) (?=\S)")


def to_documents(lines):
  """Yields output lines: sentences, and an empty line between articles.

  Args:
    lines: iterable of WikiText lines (line ends stripped or not).
  """
  started = False
  for line in lines:
    line = line.rstrip("\n")
    if _TITLE.match(line):
      if started:
        yield ""
      started = True
      continue
    if _HEADING.match(line) or not line.strip():
      continue
    for sentence in _SENTENCE_END.split(line.strip()):
      yield sentence
