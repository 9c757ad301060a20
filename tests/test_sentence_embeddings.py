"""extract_features.py --pooling: mean pooling equals NumPy over the token vectors; with the real
MiniLM weights it equals HuggingFace's mean-pooled last layer and ranks STS-B dev pairs well."""

import csv
import json

import numpy as np
import pytest

from tasks import classifier
from tests import scripts

pytestmark = pytest.mark.slow

TOLERANCE = 1e-4


def extract(tmp_path, vocab_file, config_file, checkpoint, lines, output_name, *flags):
  input_file = tmp_path / "input.txt"
  input_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
  output = tmp_path / output_name
  result = scripts.run_in_process(
      "extract_features.py", f"--input_file={input_file}", f"--output_file={output}",
      f"--vocab_file={vocab_file}", f"--bert_config_file={config_file}",
      f"--init_checkpoint={checkpoint}", "--max_seq_length=64", "--batch_size=32", *flags)
  assert result.returncode == 0, result.stderr[-3000:]
  return output


@pytest.fixture(scope="module")
def stsb_dev(shared_data):
  path = shared_data / "glue" / "STS-B" / "dev.tsv"
  if not path.is_file():
    pytest.skip(f"{path} is absent")
  with open(path, encoding="utf-8") as reader:
    return list(csv.DictReader(reader, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_mean_pooling_is_the_masked_mean_of_the_token_vectors(minilm_bert_dir, tmp_path):
  files = (minilm_bert_dir / "vocab.txt", minilm_bert_dir / "bert_config.json",
           minilm_bert_dir / "bert_model.ckpt")
  lines = ["A short one.", "A much longer sentence with many more words than the first one has.",
           "Two texts ||| in one input."]
  tokens = extract(tmp_path, *files, lines, "tokens.jsonl", "--layers=-2")
  pooled = np.load(extract(tmp_path, *files, lines, "mean.npy", "--layers=-2", "--pooling=mean"))
  for row, line in enumerate(tokens.read_text().splitlines()):
    record = json.loads(line)
    vectors = np.array([f["layers"][0]["values"] for f in record["features"]])
    # The JSON values are rounded to 6 decimals.
    np.testing.assert_allclose(pooled[row], vectors.mean(axis=0), atol=2e-6)
  cls = [json.loads(l)["embedding"] for l in extract(
      tmp_path, *files, lines, "cls.jsonl", "--layers=-2", "--pooling=cls").read_text().splitlines()]
  first = [json.loads(l)["features"][0]["layers"][0]["values"]
           for l in tokens.read_text().splitlines()]
  np.testing.assert_allclose(cls, first, atol=2e-6)


def test_minilm_mean_pooling_equals_huggingface_and_ranks_stsb(minilm_dir, minilm_bert_dir,
                                                               stsb_dev, tmp_path):
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  sentences = [row["sentence1"] for row in stsb_dev] + [row["sentence2"] for row in stsb_dev]
  embeddings = np.load(extract(
      tmp_path, minilm_bert_dir / "vocab.txt", minilm_bert_dir / "bert_config.json",
      minilm_bert_dir / "bert_model.ckpt", sentences, "stsb.npy", "--layers=-1",
      "--pooling=mean"))
  assert embeddings.shape == (len(sentences), 384)

  torch.set_num_threads(2)
  model = transformers.BertModel.from_pretrained(str(minilm_dir)).eval()
  tokenizer = transformers.BertTokenizerFast.from_pretrained(str(minilm_dir))
  sample = sentences[:32]
  batch = tokenizer(sample, padding=True, truncation=True, max_length=64, return_tensors="pt")
  with torch.no_grad():
    hidden = model(**batch).last_hidden_state.numpy()
  mask = batch["attention_mask"].numpy()[:, :, None]
  reference = (hidden * mask).sum(axis=1) / mask.sum(axis=1)
  np.testing.assert_allclose(embeddings[:32], reference, atol=TOLERANCE)

  normalized = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
  half = len(stsb_dev)
  cosine = np.sum(normalized[:half] * normalized[half:], axis=1)
  gold = np.array([float(row["score"]) for row in stsb_dev])
  spearman = classifier.spearman(cosine, gold, np.ones(half))
  print(f"STS-B dev ({half} pairs): Spearman of cosine similarity {spearman:.4f}")
  assert spearman >= 0.8
