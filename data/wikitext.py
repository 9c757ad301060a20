"""WikiText token files -> the original pretraining input format (sentence per line, documents).

WikiText marks each article with a ` = Title = ` line and sections with ` = = Section = = `; its
text is already word-tokenised (` @-@ ` for hyphens). Articles become documents, section headings
are dropped, and paragraphs are split into sentences after ` . `, ` ? ` and ` ! `.
"""

import re

_TITLE = re.compile(r"^ = [^=].* = $")
_HEADING = re.compile(r"^ (= )+.*( =)+ $")
_SENTENCE_END = re.compile(r"(?<= [.?!]) (?=\S)")


def to_documents(lines, paragraphs=False):
  """Yields output lines: sentences, and an empty line between articles.

  Args:
    lines: iterable of WikiText lines (line ends stripped or not).
    paragraphs: make each paragraph a document, not each article: a corpus of short documents,
      as news or web pages are (most of its instances are shorter than a row).

  >>> from data import wikitext
  >>> lines = [" = A = ", " One . Two . ", " Three . ", " = B = ", " Four . "]
  >>> list(wikitext.to_documents(lines))
  ['One .', 'Two .', 'Three .', '', 'Four .']
  >>> list(wikitext.to_documents(lines, paragraphs=True))
  ['One .', 'Two .', '', 'Three .', '', 'Four .']
  """
  started = False
  for line in lines:
    line = line.rstrip("\n")
    if _TITLE.match(line):
      if not paragraphs:
        if started:
          yield ""
        started = True
      continue
    if _HEADING.match(line) or not line.strip():
      continue
    if paragraphs:
      if started:
        yield ""
      started = True
    for sentence in _SENTENCE_END.split(line.strip()):
      yield sentence
