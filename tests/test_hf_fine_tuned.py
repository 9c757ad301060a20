"""A HuggingFace classifier and token classifier, fine-tuned by transformers, converted with
`convert_checkpoint.py --direction=hf_to_bert`, then run by `run_classifier.py` / `run_ner.py`
with `--do_predict --export_dir` and no training: their predictions and their exports' raw-text
signatures are transformers' (argmax identical, probabilities within 1e-5), with the labels the
HuggingFace model names.
"""

import numpy as np
import pytest
import tensorflow as tf

from modeling import bert_config as bert_config_lib
from modeling import checkpoint_io
from modeling import classifier_model
from tests import scripts

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

WORDS = ("the river bees flew over bread she baked with honey carpenter cut spruce lamp island "
         "ada lovelace lived in london maria costa visited paris works at acme").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + WORDS + ["##s", "##ed"]
TOPICS = {0: "nature", 1: "food", 2: "craft"}
TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "B-ORG"}
SENTENCES = ["The bees flew over the river.", "She baked bread with honey.",
             "The carpenter cut the spruce.", "Ada Lovelace lived in London.",
             "Maria Costa visited Paris, works at Acme."]
MAX_SEQ_LENGTH = 32
TOLERANCE = 1e-5


def _hf_config(**labels):
  return transformers.BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=37,
                                 max_position_embeddings=64, **labels)


def _tokenizer(vocab_file):
  return transformers.BertTokenizer(vocab=str(vocab_file), do_lower_case=True)


def _fine_tune(model, batch, labels):
  """Four AdamW steps of the model's own loss: the head and the encoder move off their init."""
  torch.manual_seed(0)
  optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
  model.train()
  for _ in range(4):
    optimizer.zero_grad()
    model(**batch, labels=labels).loss.backward()
    optimizer.step()
  return model.eval()


def _save_hf(model, tokenizer, vocab_file, directory):
  """The files a hub repository of a BERT holds: config.json, model.safetensors, vocab.txt,
  tokenizer_config.json."""
  model.save_pretrained(directory)
  tokenizer.save_pretrained(directory)
  (directory / "vocab.txt").write_text(vocab_file.read_text())


def _convert(hf_dir, bert_dir):
  result = scripts.run_in_process("convert_checkpoint.py", "--direction=hf_to_bert",
                                  f"--input_dir={hf_dir}", f"--output_dir={bert_dir}")
  assert result.returncode == 0, result.stderr


def _run(script, bert_dir, data_dir, output_dir, export_dir, *flags):
  result = scripts.run_in_process(
      script, "--do_predict", f"--data_dir={data_dir}", f"--vocab_file={bert_dir}/vocab.txt",
      f"--bert_config_file={bert_dir}/bert_config.json", f"--init_checkpoint={bert_dir}/bert_model.ckpt",
      f"--output_dir={output_dir}", f"--export_dir={export_dir}", "--export_version=1",
      f"--max_seq_length={MAX_SEQ_LENGTH}", "--predict_batch_size=2", *flags)
  assert result.returncode == 0, result.stderr
  return tf.saved_model.load(str(export_dir / "1"))


def _softmax(logits):
  return torch.softmax(logits, dim=-1).detach().numpy()


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
  path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  path.write_text("".join(f"{token}\n" for token in VOCAB))
  return path


def test_fine_tuned_classifier_predicts_and_serves_as_transformers(vocab_file, tmp_path):
  torch.manual_seed(0)
  tokenizer = _tokenizer(vocab_file)
  model = transformers.BertForSequenceClassification(
      _hf_config(id2label=TOPICS, label2id={v: k for k, v in TOPICS.items()}))
  batch = tokenizer(SENTENCES, padding=True, return_tensors="pt")
  _fine_tune(model, batch, torch.tensor([0, 1, 2, 0, 2]))
  _save_hf(model, tokenizer, vocab_file, tmp_path / "hf")
  _convert(tmp_path / "hf", tmp_path / "bert")
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  (data_dir / "test.tsv").write_text("sentence\n" + "".join(f"{s}\n" for s in SENTENCES))

  export = _run("run_classifier.py", tmp_path / "bert", data_dir, tmp_path / "run",
                tmp_path / "export", "--task_name=tsv")

  with torch.no_grad():
    expected = _softmax(model(**batch).logits)
  labels = (tmp_path / "run" / "label_list.txt").read_text().splitlines()
  assert labels == [TOPICS[i] for i in range(len(TOPICS))]
  predicted = np.loadtxt(tmp_path / "run" / "test_results.tsv", delimiter="\t")
  np.testing.assert_allclose(predicted, expected, rtol=0, atol=TOLERANCE)
  assert list(predicted.argmax(-1)) == list(expected.argmax(-1))
  served = export.signatures["serving_default"](text_a=tf.constant(SENTENCES))
  np.testing.assert_allclose(served["probabilities"].numpy(), expected, rtol=0, atol=TOLERANCE)
  assert [label.decode() for label in served["label"].numpy()] == [
      TOPICS[i] for i in expected.argmax(-1)]


def test_fine_tuned_token_classifier_tags_and_serves_as_transformers(vocab_file, tmp_path):
  torch.manual_seed(0)
  tokenizer = _tokenizer(vocab_file)
  model = transformers.BertForTokenClassification(
      _hf_config(id2label=TAGS, label2id={v: k for k, v in TAGS.items()}))
  words = [sentence.replace(".", " .").replace(",", " ,").split() for sentence in SENTENCES]
  batch = tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
  gold = torch.tensor(np.random.default_rng(0).integers(0, len(TAGS), batch["input_ids"].shape))
  _fine_tune(model, batch, gold)
  _save_hf(model, tokenizer, vocab_file, tmp_path / "hf")
  _convert(tmp_path / "hf", tmp_path / "bert")
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  (data_dir / "test.txt").write_text("\n".join("".join(f"{w}\n" for w in s) for s in words))

  export = _run("run_ner.py", tmp_path / "bert", data_dir, tmp_path / "run",
                tmp_path / "export")

  with torch.no_grad():
    expected = _softmax(model(**batch).logits)
  first_pieces = [[batch.word_ids(i).index(w) for w in range(len(sentence))]
                  for i, sentence in enumerate(words)]
  expected_tags = [[TAGS[int(expected[i, position].argmax())] for position in positions]
                   for i, positions in enumerate(first_pieces)]
  lines = (tmp_path / "run" / "predictions.txt").read_text().split("\n\n")
  predicted_tags = [[line.split()[-1] for line in block.splitlines()]
                    for block in lines if block.strip()]
  assert predicted_tags == expected_tags
  served = export.signatures["serving_default"](
      sentences=tf.constant([" ".join(sentence) for sentence in words]))
  assert [[tag.decode() for tag in row if tag] for row in served["tags"].numpy()] == expected_tags

  # The probabilities themselves: the converted checkpoint in this project's tagger.
  config = bert_config_lib.BertConfig.from_json_file(str(tmp_path / "bert" / "bert_config.json"))
  tagger = classifier_model.BertClassifier(config, num_outputs=len(TAGS), per_token=True)
  checkpoint_io.assign_from_checkpoint(tagger.name_to_variable(),
                                      str(tmp_path / "bert" / "bert_model.ckpt"))
  logits = tagger({"input_ids": batch["input_ids"].numpy().astype(np.int32),
                   "input_mask": batch["attention_mask"].numpy().astype(np.int32),
                   "segment_ids": batch["token_type_ids"].numpy().astype(np.int32)},
                  training=False)
  mask = batch["attention_mask"].numpy().astype(bool)
  np.testing.assert_allclose(tf.nn.softmax(logits).numpy()[mask], expected[mask], rtol=0,
                             atol=TOLERANCE)
