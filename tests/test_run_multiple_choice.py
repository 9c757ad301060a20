"""run_multiple_choice.py end to end: a learnable hand-made set, the SWAG fixture (CSV and JSON
lines), records' layout, dynamic padding, the export in a fresh process, and bad input."""

import csv
import json
import random
import re

import numpy as np
import pytest
import tensorflow as tf

from data import file_patterns
from tasks.multiple_choice import reader as multiple_choice
from tasks.multiple_choice import features as multiple_choice_features
from data import schemas
from data import sequence_pairs
from data import tokenization
from tests import scripts

pytestmark = pytest.mark.slow

# Four topics of single-piece words of the sample vocab. The context is words of one topic; the
# choices are words of each of the four topics, so only the context tells the right one.
TOPICS = [["bees", "honey", "hive", "queen", "colony", "nectar"],
          ["bread", "flour", "dough", "starter", "yeast", "loaf"],
          ["river", "water", "bridge", "valley", "hills", "fish"],
          ["club", "players", "board", "match", "moves", "members"]]
SWAG_FIELDS = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
               "ending0", "ending1", "ending2", "ending3", "label"]


run_multiple_choice = scripts.fine_tuning_runner("run_multiple_choice.py")


def run_task(tiny_model, task, data_dir, output_dir, *flags, run=run_multiple_choice):
  """run_multiple_choice.py with the tiny model on `data_dir`'s files of `task`."""
  vocab_file, config_file = tiny_model
  return run(f"--task_name={task}", f"--data_dir={data_dir}", f"--vocab_file={vocab_file}",
             f"--bert_config_file={config_file}", f"--output_dir={output_dir}", *flags)


def read_jsonl(path):
  return [json.loads(line) for line in open(path, encoding="utf-8")]


def topic_examples(rng, count, labelled=True):
  examples = []
  for _ in range(count):
    order = rng.sample(range(4), 4)
    label = rng.randrange(4)
    topics = order[1:label + 1] + [order[0]] + order[label + 1:]
    example = {"context": " ".join(rng.sample(TOPICS[order[0]], 4)),
               "choices": [" ".join(rng.sample(TOPICS[t], 3)) for t in topics]}
    if labelled:
      example["label"] = label
    examples.append(example)
  return examples


def write_jsonl(path, records):
  path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


# Unseeded, a run of the topic set could sit on a plateau until the end (0.51-0.57 accuracy,
# loss near ln 2 = 0.69) or never leave ln 4: 3 runs in 7 here and one CI run did. Seeded, the
# run repeats (see test_the_same_seed_repeats_a_run_exactly). At 2,000 steps seeds 0, 1, 2 and 3
# each reached accuracy 1.0 (eval loss 2e-5 to 1.3e-4); at the 500 steps run here seeds 0, 1, 2
# and 3 reached 0.75, 1.0, 1.0 and 0.79 (eval losses 0.38, 1e-3, 3.6e-4, 0.74), so seed 2. A
# seeded run repeats on the same kind of machine; on another CPU the arithmetic, hence the path,
# may differ.
TOPIC_RUN_SEED = 2


@pytest.fixture(scope="module")
def topic_run(tiny_model, tmp_path_factory):
  """Trained from scratch on 2,000 generated examples (4 epochs, 500 steps), evaluated on 100
  others, 8 predicted, exported: (output_dir, data_dir, export path)."""
  tmp_path = tmp_path_factory.mktemp("topics")
  rng = random.Random(0)
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  write_jsonl(data_dir / "train.jsonl", topic_examples(rng, 2000))
  write_jsonl(data_dir / "dev.jsonl", topic_examples(rng, 100))
  write_jsonl(data_dir / "test.jsonl", topic_examples(rng, 8, labelled=False))
  output_dir = tmp_path / "output"
  result = run_task(
      tiny_model, "jsonl", data_dir, output_dir, "--do_train",
      "--do_eval", "--do_predict", "--max_seq_length=16", "--train_batch_size=16",
      "--eval_batch_size=32", "--predict_batch_size=3", "--num_train_epochs=4",
      "--learning_rate=1e-3", "--steps_per_loop=500", f"--export_dir={tmp_path / 'export'}",
      "--export_version=1", f"--seed={TOPIC_RUN_SEED}")
  assert result.returncode == 0, result.stderr[-3000:]
  return output_dir, data_dir, tmp_path / "export" / "1"


def test_a_tiny_model_from_scratch_learns_which_choice_fits_the_context(topic_run):
  output_dir, _, _ = topic_run
  results = scripts.read_eval_results(output_dir / "eval_results.txt")
  assert set(results) == {"eval_accuracy", "eval_loss", "global_step"}
  assert results["global_step"] == 500  # int(2000 / 16 * 4)
  # Chance is 0.25 (every example offers one choice per topic) and a loss of ln 4 = 1.386.
  assert results["eval_accuracy"] >= 0.6, results
  assert results["eval_loss"] < 1.0, results
  predictions = read_jsonl(output_dir / "predictions.jsonl")
  assert [p["id"] for p in predictions] == [f"test-{i}" for i in range(8)]
  for prediction in predictions:
    assert set(prediction) == {"id", "scores", "probabilities", "choice"}
    assert len(prediction["scores"]) == 4
    assert sum(prediction["probabilities"]) == pytest.approx(1.0, abs=1e-6)
    assert prediction["choice"] == int(np.argmax(prediction["scores"]))
  # The variable names of the head, beside the original encoder's.
  names = dict(tf.train.list_variables(str(output_dir / "model.ckpt-500")))
  assert names["cls/multiple_choice/output_weights"] == [1, 32]
  assert names["cls/multiple_choice/output_bias"] == [1]
  assert "bert/pooler/dense/kernel" in names
  # The bias every score shares gets no gradient from the softmax; training leaves it at zero.
  reader = tf.train.load_checkpoint(str(output_dir / "model.ckpt-500"))
  assert not reader.get_tensor("cls/multiple_choice/output_bias").any()


def test_the_same_seed_repeats_a_run_exactly(tiny_model, topic_run, tmp_path):
  _, data_dir, _ = topic_run
  results = []
  # One run in this process, after others, and one in a process of its own, as a user repeats
  # a run: nothing but the flags may decide the result.
  for in_process in (True, False):
    output_dir = tmp_path / f"in_process_{in_process}"
    result = run_task(tiny_model, "jsonl", data_dir, output_dir, "--do_train", "--do_eval",
                      "--max_seq_length=16", "--train_batch_size=16", "--num_train_epochs=0.2",
                      "--learning_rate=1e-3", "--steps_per_loop=25", "--seed=7",
                      run=scripts.fine_tuning_runner("run_multiple_choice.py", in_process))
    assert result.returncode == 0, result.stderr[-3000:]
    results.append(scripts.read_eval_results(output_dir / "eval_results.txt"))
  # Two such runs of 125 steps ended at eval losses 0.42 and 0.49 unseeded, 0.80 and 1.07 seeded
  # without deterministic ops; at these 25 steps, seeded without deterministic ops, at 1.386137
  # and 1.386103 (accuracies 0.27 and 0.34).
  assert results[0]["global_step"] == 25
  assert results[0] == results[1]


LOAD_AND_PREDICT = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # the in-graph tokenizer's ops
model = tf.saved_model.load(sys.argv[1])
request, ids = json.loads(sys.argv[2]), json.loads(sys.argv[3])
text = model.signatures["serving_default"](context=tf.constant(request["context"]),
                                           choices=tf.constant(request["choices"]))
by_ids = model.signatures["predict_ids"](**{k: tf.constant(v) for k, v in ids.items()})
odd = model.signatures["serving_default"](
    context=tf.constant(["", "bees " * 300]),
    choices=tf.constant([["honey", "", "flour bread"], ["x", "y", "bees " * 300]]))
print(json.dumps({"probabilities": text["probabilities"].numpy().tolist(),
                  "scores": text["scores"].numpy().tolist(),
                  "choice": text["choice"].numpy().tolist(),
                  "ids_probabilities": by_ids["probabilities"].numpy().tolist(),
                  "odd_shape": list(odd["probabilities"].shape)}))
"""


def test_export_in_a_fresh_process_answers_as_the_runner(tiny_model, topic_run):
  output_dir, data_dir, export_path = topic_run
  vocab_file, _ = tiny_model
  assert (export_path / "assets" / "vocab.txt").read_text() == open(vocab_file).read()
  tests = read_jsonl(data_dir / "test.jsonl")
  request = {"context": [t["context"] for t in tests], "choices": [t["choices"] for t in tests]}
  # Token ids made by the Python tokenizer, packed as the runner packs them.
  tokenizer = tokenization.FullTokenizer(vocab_file)
  packed = [multiple_choice_features.pack_choices(
      multiple_choice.MultipleChoiceExample("", t["context"], t["choices"], None, ""),
      tokenizer, 16) for t in tests]
  ids = {name: [[getattr(pair, name) for pair in pairs] for pairs in packed]
         for name in multiple_choice_features.SEQUENCE_FEATURES}
  answers = scripts.run_python_json(LOAD_AND_PREDICT, export_path, json.dumps(request),
                                    json.dumps(ids), cwd=output_dir)
  runner = read_jsonl(output_dir / "predictions.jsonl")
  np.testing.assert_allclose(answers["probabilities"], [p["probabilities"] for p in runner],
                             atol=1e-5)
  np.testing.assert_allclose(answers["ids_probabilities"], [p["probabilities"] for p in runner],
                             atol=1e-5)
  np.testing.assert_allclose(answers["scores"], [p["scores"] for p in runner], atol=1e-5)
  assert answers["choice"] == [p["choice"] for p in runner]
  # Empty texts and texts longer than max_seq_length are served; any number of choices.
  assert answers["odd_shape"] == [2, 3]


@pytest.fixture(scope="module")
def swag_fixture(shared_data):
  path = shared_data / "samples" / "hf_fixtures" / "swag" / "sample.json"
  if not path.is_file():
    pytest.skip(f"{path} is absent")
  return path


def write_swag_csv(path, rows, labelled=True):
  """The public release's CSV layout (a leading unnamed index column; no label in test.csv)."""
  fields = SWAG_FIELDS if labelled else SWAG_FIELDS[:-1]
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(fields)
    for index, row in enumerate(rows):
      values = dict(row, **{"": index, "video-id": f"anetv_{index}", "fold-ind": index,
                            "startphrase": f"{row['sent1']} {row['sent2']}",
                            "gold-source": "gold"})
      writer.writerow([values[name] for name in fields])


def test_swag_fixture_reads_every_row_as_json_lines_and_as_the_release_csv(swag_fixture,
                                                                          tmp_path):
  rows = [json.loads(line) for line in open(swag_fixture, encoding="utf-8")]
  from_json = multiple_choice.read_examples("swag", str(swag_fixture), "train", labelled=True)
  assert len(from_json) == len(rows) == 10
  for example, row in zip(from_json, rows):
    assert example.context == row["sent1"]
    assert example.choices == tuple(f"{row['sent2']} {row[f'ending{i}']}" for i in range(4))
    assert example.label == row["label"]
  write_swag_csv(tmp_path / "train.csv", rows)
  from_csv = multiple_choice.read_examples("swag", str(tmp_path / "train.csv"), "train", True)
  assert [(e.context, e.choices, e.label) for e in from_csv] == [
      (e.context, e.choices, e.label) for e in from_json]
  assert from_csv[3].source == f"{tmp_path / 'train.csv'}:5"
  write_swag_csv(tmp_path / "test.csv", rows, labelled=False)
  unlabelled = multiple_choice.read_examples("swag", str(tmp_path / "test.csv"), "test", False)
  assert len(unlabelled) == 10 and all(e.label is None for e in unlabelled)


@pytest.fixture(scope="module")
def swag_run(tiny_model, swag_fixture, tmp_path_factory):
  """The fixture as the release's train.csv / val.csv / test.csv, one training step."""
  tmp_path = tmp_path_factory.mktemp("swag")
  rows = [json.loads(line) for line in open(swag_fixture, encoding="utf-8")]
  data_dir = tmp_path / "swag"
  data_dir.mkdir()
  write_swag_csv(data_dir / "train.csv", rows)
  write_swag_csv(data_dir / "val.csv", rows)
  write_swag_csv(data_dir / "test.csv", rows, labelled=False)
  output_dir = tmp_path / "output"
  result = run_task(tiny_model, "swag", data_dir, output_dir, "--do_train", "--do_eval",
                    "--do_predict", "--max_seq_length=40", "--train_batch_size=10",
                    "--eval_batch_size=4", "--predict_batch_size=3", "--num_train_epochs=1")
  assert result.returncode == 0, result.stderr[-3000:]
  return output_dir, data_dir, rows


def test_swag_records_hold_every_choice_packed_as_a_pair(tiny_model, swag_run):
  output_dir, _, rows = swag_run
  vocab_file, _ = tiny_model
  tokenizer = tokenization.FullTokenizer(vocab_file)
  records = {name: [tf.train.Example.FromString(r.numpy())
                    for r in tf.data.TFRecordDataset(str(output_dir / f"{name}.tf_record"))]
             for name in ("train", "eval", "predict")}
  # 10 examples; eval padded to a multiple of 4, predict to a multiple of 3.
  assert [len(records[name]) for name in ("train", "eval", "predict")] == [10, 12, 12]
  real = [r.features.feature["is_real_example"].int64_list.value[0] for r in records["eval"]]
  assert real == [1] * 10 + [0] * 2
  spec = multiple_choice_features.multiple_choice_feature_spec(4, 40)
  for record, row in zip(records["train"], rows):
    features = record.features.feature
    assert set(features) == set(spec)
    assert all(len(features[name].int64_list.value) == 4 * 40
               for name in multiple_choice_features.SEQUENCE_FEATURES)
    assert features["label_ids"].int64_list.value == [row["label"]]
    parsed = schemas.decode_record(record.SerializeToString(), spec)
    assert parsed["input_ids"].shape == [4, 40]
    for i in range(4):
      expected = sequence_pairs.pack(tokenizer, tokenizer.tokenize(row["sent1"]),
                                     tokenizer.tokenize(f"{row['sent2']} {row[f'ending{i}']}"),
                                     40)
      for name in multiple_choice_features.SEQUENCE_FEATURES:
        assert parsed[name][i].numpy().tolist() == getattr(expected, name)
  results = scripts.read_eval_results(output_dir / "eval_results.txt")
  assert results["global_step"] == 1 and 0.0 <= results["eval_accuracy"] <= 1.0
  assert len(read_jsonl(output_dir / "predictions.jsonl")) == 10


def test_dynamic_padding_and_padding_rows_change_no_prediction(tiny_model, swag_run, tmp_path):
  output_dir, data_dir, _ = swag_run
  result = run_task(
      tiny_model, "swag", data_dir, tmp_path / "out", "--do_predict",
      f"--init_checkpoint={output_dir / 'model.ckpt-1'}", "--max_seq_length=40",
      "--predict_batch_size=10", "--dynamic_padding=false")
  assert result.returncode == 0, result.stderr[-3000:]
  padded = read_jsonl(tmp_path / "out" / "predictions.jsonl")
  dynamic = read_jsonl(output_dir / "predictions.jsonl")
  np.testing.assert_allclose([p["scores"] for p in padded], [p["scores"] for p in dynamic],
                             atol=1e-5)


def reader_error(tmp_path, task, filename, text, labelled=True):
  path = tmp_path / filename
  path.write_text(text, encoding="utf-8")
  with pytest.raises(file_patterns.InputError) as error:
    multiple_choice.read_examples(task, str(path), "dev", labelled)
  return str(error.value).replace(str(tmp_path) + "/", "")


HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,label\n"


@pytest.mark.parametrize("task, filename, text, expected", [
    ("jsonl", "dev.jsonl", '{"context": "a", "choices": ["b", "c", "d"], "label": 0}\n'
     '{"context": "a", "choices": ["b", "c"], "label": 0}\n',
     "dev.jsonl:2: 2 choices, but dev.jsonl:1 has 3; every example needs the same number"),
    ("jsonl", "dev.jsonl", '\n{"context": "a", "choices": ["b", "c"], "label": 2}\n',
     "dev.jsonl:2: label 2 is out of range for 2 choices (0..1)"),
    ("jsonl", "dev.jsonl", '{"context": "a", "choices": ["b", "c"], "label": "x"}\n',
     "dev.jsonl:1: label 'x' is not a choice index"),
    ("jsonl", "dev.jsonl", '{"context": " ", "choices": ["b", "c"], "label": 0}\n',
     "dev.jsonl:1: empty context"),
    ("jsonl", "dev.jsonl", '{"context": "a", "choices": ["b", "c"], "label": 0}\n{"context": \n',
     "dev.jsonl:2: malformed JSON (Expecting value at column 12)"),
    ("jsonl", "dev.jsonl", '{"context": "a", "choices": ["b", "c"]}\n', "dev.jsonl:1: no 'label'"),
    ("jsonl", "dev.jsonl", '{"context": "a", "choices": "b c", "label": 0}\n',
     "dev.jsonl:1: 'choices' must be a list of at least 2 strings"),
    ("swag", "val.csv", HEADER + "0,v,0,s,A man,He,gold,runs.,sits.,eats.,1\n"
     "1,v,1,s,A man,He,gold,runs.,sits.,1\n",
     "val.csv:3: 10 columns, but the header has 11 (3 endings)"),
    ("swag", "val.csv", HEADER + "0,v,0,s,A man,He,gold,runs.,sits.,eats.,3\n",
     "val.csv:2: label 3 is out of range for 3 choices (0..2)"),
    ("swag", "val.csv", HEADER + "0,v,0,s,,He,gold,runs.,sits.,eats.,0\n",
     "val.csv:2: empty context"),
    ("swag", "val.csv", HEADER + '0,v,0,s,"A man,He,gold,runs.,sits.,eats.,0\n',
     "val.csv:2: malformed (unexpected end of data)"),
    ("swag", "val.csv", HEADER.replace("sent1", "sentence1") + "0,v,0,s,A,He,g,r,s,e,0\n",
     "val.csv:1: no column 'sent1'; the header has"),
    ("swag", "val.json", '{"sent1": "A", "sent2": "He", "ending0": "r", "ending2": "s", '
     '"label": 0}\n', "val.json:1: expected columns ending0, ending1, ... (at least 2), found "
     "['ending0', 'ending2']"),
    ("swag", "val.json", '{"sent2": "He", "ending0": "r", "ending1": "s", "label": 0}\n',
     "val.json:1: no 'sent1'"),
    # str.isdigit takes "1²", which int() refuses (a raw ValueError before).
    ("swag", "val.csv", HEADER + "0,v,0,s,A man,He,gold,runs.,sits.,eats.,1\u00b2\n",
     "val.csv:2: label '1²' is not a choice index"),
    # json.loads raised RecursionError (found by tests/test_reader_fuzz.py).
    ("jsonl", "dev.jsonl", '{"context": "a", "choices": ["b", "c"], "label": 0}\n' + "[" * 5000,
     "dev.jsonl:2: malformed JSON (arrays or objects nested too deeply)"),
])
def test_bad_input_is_named_by_file_and_line(tmp_path, task, filename, text, expected):
  assert reader_error(tmp_path, task, filename, text).startswith(expected)


def test_test_files_may_lack_labels_but_not_choices(tmp_path):
  path = tmp_path / "test.jsonl"
  write_jsonl(path, [{"context": "a", "choices": ["b", "c"]},
                     {"context": "a", "choices": ["b", "c"], "label": 1},
                     {"context": "a", "choices": ["b", "c"], "label": -1}])
  examples = multiple_choice.read_examples("jsonl", str(path), "test", labelled=False)
  assert [e.label for e in examples] == [None, 1, None]
  assert reader_error(tmp_path, "jsonl", "test.jsonl", '{"context": "a", "choices": ["b"]}\n',
                      labelled=False).startswith("test.jsonl:1: 'choices' must be a list")


def test_runner_stops_before_training_with_one_line(tiny_model, tmp_path):
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  write_jsonl(data_dir / "train.jsonl", topic_examples(random.Random(1), 4))
  write_jsonl(data_dir / "dev.jsonl", [{"context": "bees", "choices": ["a", "b", "c"],
                                        "label": 0}])
  for task, expected in (
      ("jsonl", r"dev\.jsonl:1: 3 choices, but .*train\.jsonl:1 has 4; every example needs "
                r"the same number$"),
      ("mnli", r"--task_name=mnli: unknown task; known tasks: swag, jsonl$")):
    result = run_task(tiny_model, task, data_dir, tmp_path / "out", "--max_seq_length=16",
                      "--do_train", "--do_eval")
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("run_multiple_choice.py: error: "), result.stderr[-2000:]
    assert re.search(expected, last_line), last_line
    assert not (tmp_path / "out").exists()
