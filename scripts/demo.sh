#!/usr/bin/env bash
# `make demo`: the whole pipeline that exists so far, on the sample corpus the project ships.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
DEMO_DIR=${DEMO_DIR:-demo_output}
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
mkdir -p "$DEMO_DIR"

stage() { printf '\n== %s\n' "$*"; }

stage "1. Learn a WordPiece vocabulary from samples/sample_corpus.txt"
"$PYTHON" learn_vocab.py --input_file=samples/sample_corpus.txt \
  --vocab_file="$DEMO_DIR/vocab.txt" --vocab_size=3000 --min_count=2 --alsologtostderr=false
echo "wrote $DEMO_DIR/vocab.txt ($(wc -l < "$DEMO_DIR/vocab.txt") entries)"

stage "2. Tokenize the corpus with it (pure Python and in-graph)"
"$PYTHON" scripts/show_tokenization.py --input_file=samples/sample_corpus.txt \
  --vocab_file="$DEMO_DIR/vocab.txt"
