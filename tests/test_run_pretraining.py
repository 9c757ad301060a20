"""run_pretraining.py end to end on small records: learning, checkpoint names, bad input."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from modeling import checkpoint_io
from tests import scripts
from tests.conftest import CHILD_PYTHONPATH
from tests.conftest import REPO_ROOT
from tests.conftest import SAMPLES_DIR
from tests.pretraining_records import write_records

pytestmark = pytest.mark.slow

SEQ_LENGTH = 32
NUM_PREDICTIONS = 5
VOCAB_SIZE = 100
TINY_CONFIG = {"vocab_size": VOCAB_SIZE, "hidden_size": 32, "num_hidden_layers": 2,
               "num_attention_heads": 2, "intermediate_size": 64,
               "max_position_embeddings": 64, "type_vocab_size": 2}


def run_pretraining(tmp_path, *extra_flags, config=None, records=None,
                    run=scripts.run_in_process):
  config_path = tmp_path / "bert_config.json"
  config_path.write_text(json.dumps(config or TINY_CONFIG))
  records = records or write_records(tmp_path / "data.tfrecord")
  flags = [f"--input_file={records}", f"--output_dir={tmp_path / 'out'}",
           f"--bert_config_file={config_path}", f"--max_seq_length={SEQ_LENGTH}",
           f"--max_predictions_per_seq={NUM_PREDICTIONS}", "--train_batch_size=16",
           "--eval_batch_size=16", "--learning_rate=1e-3", "--num_warmup_steps=5",
           "--distribution_strategy=one_device", *extra_flags]
  return run("run_pretraining.py", *flags)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """40 steps of TINY_CONFIG, checkpoints at 20 and 40: (directory holding `out`, the result).
  Tests that write into `out` copy it first."""
  tmp_path = tmp_path_factory.mktemp("trained")
  # Gradient accumulation on: it exercises the micro-batch loop on a BERT-sized graph. In a child
  # process: the loop turns off one of Grappler's rewrites for the whole process.
  result = run_pretraining(tmp_path, "--do_train", "--do_eval", "--num_train_steps=40",
                           "--gradient_accumulation_steps=2",
                           "--log_every_steps=10", "--save_checkpoints_steps=20",
                           "--max_eval_steps=4", run=scripts.run_script)
  assert result.returncode == 0, result.stderr
  return tmp_path, result


def test_losses_fall_and_checkpoints_carry_the_original_names(trained):
  tmp_path, result = trained
  losses = [float(line.split("loss = ")[1].split(",")[0])
            for line in result.stderr.splitlines() if "] step " in line]
  # Lines after the first step, at steps 10, 20, 30 and 40.
  assert len(losses) == 5 and losses[-1] < 0.8 * losses[0], losses
  results = scripts.read_eval_results(tmp_path / "out" / "eval_results.txt")
  assert set(results) == {"global_step", "loss", "masked_lm_accuracy", "masked_lm_loss",
                          "next_sentence_accuracy", "next_sentence_loss"}
  assert results["global_step"] == 40
  names = dict(checkpoint_io.list_checkpoint_variables(str(tmp_path / "out")))
  assert names["bert/encoder/layer_1/attention/self/query/kernel"] == [32, 32]
  assert names["cls/seq_relationship/output_weights"] == [2, 32]
  assert names["cls/predictions/output_bias/adam_m"] == [VOCAB_SIZE]
  assert "global_step" in names
  assert tf.train.latest_checkpoint(str(tmp_path / "out")).endswith("model.ckpt-40")


@pytest.mark.parametrize("case, expected", [
    ("seq_length", "records of max_seq_length 32 (length of input_ids), but --max_seq_length=16"),
    ("predictions", "records made with --max_predictions_per_seq=5 (5 masked_lm_positions), but "
                    "--max_predictions_per_seq=7"),
    ("position_table", "--max_seq_length=32 exceeds max_position_embeddings 16"),
    ("vocab", "has input_ids id"),
    ("segments", "has segment_ids id 1, but the config's type_vocab_size is 1"),
    ("empty_glob", "matches no file"),
    ("no_task", "at least one of --do_train or --do_eval must be true"),
    ("learning_rate", "--learning_rate must be positive, got -0.001"),
])
def test_bad_input_fails_before_training_with_one_line(tmp_path, case, expected):
  flags = ["--do_train", "--num_train_steps=2"]
  config = dict(TINY_CONFIG)
  records = None
  if case == "seq_length":
    flags.append("--max_seq_length=16")
  elif case == "predictions":
    flags.append("--max_predictions_per_seq=7")
  elif case == "position_table":
    config["max_position_embeddings"] = 16
  elif case == "vocab":
    config["vocab_size"] = 50
  elif case == "segments":
    config["type_vocab_size"] = 1
  elif case == "empty_glob":
    records = tmp_path / "nothing-*.tfrecord"
  elif case == "learning_rate":
    flags.append("--learning_rate=-1e-3")
  else:
    flags = []
  result = run_pretraining(tmp_path, *flags, config=config, records=records)
  assert result.returncode == 1
  assert "Traceback" not in result.stderr
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith("run_pretraining.py: error: ") and expected in last_line, last_line
  assert not (tmp_path / "out" / "checkpoint").exists()


# Runs in a fresh process: logical devices must be configured before TensorFlow initialises.
TWO_REPLICA_SCRIPT = """
import json, sys
import keras
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from modeling import bert_config, optimization
from tasks.pretraining import features, task
from training import engine, input_pipeline

data_path, output_dir, config_json = sys.argv[1], sys.argv[2], sys.argv[3]
config = bert_config.BertConfig.from_dict(json.loads(config_json))
spec = features.pretraining_feature_spec(%(seq)d, %(pred)d)
losses = {}
# The packed model reads the records as packed rows of one instance each.
for name, strategy, packed in (
    ("one_device", tf.distribute.OneDeviceStrategy("/cpu:0"), False),
    ("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), False),
    ("mirrored_packed", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), True)):
  keras.utils.set_random_seed(0)  # the same initial weights in every run
  run_config = engine.RunConfig(output_dir=f"{output_dir}/{name}", num_train_steps=5,
                                train_batch_size=8, steps_per_loop=5, save_checkpoints_steps=5)
  trainer = engine.Trainer(strategy, task.PretrainingTask(config, packed=packed),
                           run_config, lambda: optimization.create_optimizer(1e-3, 5, 1))
  input_fn = input_pipeline.make_input_fn(
      [data_path], spec, 8, True, shuffle_buffer_size=0, seed=0,
      example_fn=task.as_packed_rows if packed else None)
  losses[name] = [loss for _, loss in trainer.train(input_fn)["history"]]
print("LOSSES " + json.dumps(losses))
""" % {"seq": SEQ_LENGTH, "pred": NUM_PREDICTIONS}


def test_two_replicas_give_the_losses_of_one_device(tmp_path):
  # Without dropout and with the same number of predictions in every record (so per-replica
  # masked-LM ratios average to the global one), 2 replicas must follow the 1-device curve, with
  # the unpacked model and with the packed one.
  config = dict(TINY_CONFIG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  records = write_records(tmp_path / "data.tfrecord", num_records=40)
  result = subprocess.run(
      [sys.executable, "-c", TWO_REPLICA_SCRIPT, str(records), str(tmp_path), json.dumps(config)],
      capture_output=True, text=True, cwd=REPO_ROOT,
      env=dict(os.environ, PYTHONPATH=CHILD_PYTHONPATH))
  assert result.returncode == 0, result.stderr[-3000:]
  losses = json.loads(result.stdout.split("LOSSES ")[1])
  one, two = np.array(losses["one_device"]), np.array(losses["mirrored"])
  assert len(one) == len(two) == 5
  np.testing.assert_allclose(two, one, rtol=1e-4)
  np.testing.assert_allclose(losses["mirrored_packed"], one, rtol=1e-4)
  assert one[-1] < one[0]


def test_pretraining_on_the_sample_corpus_learns(tmp_path, sample_vocab):
  """The original-format sample text -> create_pretraining_data.py -> run_pretraining.py.

  A smaller budget than `make demo` (which reaches 1.0 / 1.0 in 400 steps): the losses must fall
  and the masked-LM accuracy rise. Seeded: unseeded, some initialisations sit on a plateau near
  the unigram loss for a while, and in one CI run the next-sentence loss, learned within the
  first 50 steps, averaged 0.468 over the last 50 against 0.422 over steps 2-50.
  """
  records = tmp_path / "sample.tfrecord"
  created = scripts.run_in_process(
      "create_pretraining_data.py", f"--input_file={SAMPLES_DIR / 'sample_corpus.txt'}",
      f"--output_file={records}", f"--vocab_file={sample_vocab}",
      f"--max_seq_length={SEQ_LENGTH}", f"--max_predictions_per_seq={NUM_PREDICTIONS}",
      "--dupe_factor=1", "--num_workers=1", "--num_output_shards=2")
  assert created.returncode == 0, created.stderr[-2000:]
  vocab_size = sum(1 for _ in open(sample_vocab, encoding="utf-8"))
  config = dict(TINY_CONFIG, vocab_size=vocab_size, hidden_size=128, intermediate_size=512)
  result = run_pretraining(tmp_path, "--do_train", "--num_train_steps=200", "--log_every_steps=50",
                           "--save_checkpoints_steps=200", "--train_batch_size=32",
                           "--num_warmup_steps=20", "--seed=0", config=config,
                           records=f"{records}*")
  assert result.returncode == 0, result.stderr[-3000:]
  # The original's usage for sharded outputs: the glob matches both shards and nothing else of
  # what create_pretraining_data.py wrote (its statistics file among them).
  assert "2 input file(s)" in result.stderr
  lines = [line for line in result.stderr.splitlines() if "] step " in line]

  def value(line, name):
    return float(line.split(f"{name} = ")[1].split(",")[0])

  # Steps 1, 50, 100, 150, 200; the second line covers steps 2-50, the last 151-200.
  assert len(lines) == 5
  assert value(lines[-1], "masked_lm_loss") < 0.95 * value(lines[1], "masked_lm_loss"), lines
  assert value(lines[-1], "masked_lm_accuracy") > value(lines[1], "masked_lm_accuracy")
  assert value(lines[-1], "next_sentence_loss") < value(lines[1], "next_sentence_loss")


@pytest.mark.parametrize("change, expected", [
    ({"num_hidden_layers": 1}, "num_hidden_layers 2 there, 1 now"),
    ({"hidden_act": "relu"}, "hidden_act 'gelu' there, 'relu' now"),
])
def test_resuming_with_another_config_is_refused(trained, tmp_path, change, expected):
  shutil.copytree(trained[0] / "out", tmp_path / "out")
  recorded = json.loads((tmp_path / "out" / "bert_config.json").read_text())
  assert recorded["num_hidden_layers"] == 2 and recorded["hidden_act"] == "gelu"
  resumed = run_pretraining(tmp_path, "--do_train", "--num_train_steps=44",
                            config=dict(TINY_CONFIG, **change))
  assert resumed.returncode == 1
  last_line = resumed.stderr.strip().splitlines()[-1]
  assert last_line.startswith(f"run_pretraining.py: error: {tmp_path / 'out' / 'bert_config.json'}"
                              ", the config of the run"), last_line
  assert expected in last_line
  assert sorted(p.name for p in (tmp_path / "out").glob("model.ckpt-*.index")) == [
      "model.ckpt-20.index", "model.ckpt-40.index"]


def test_a_checkpoint_of_another_depth_is_refused_unless_a_partial_start_is_asked(trained,
                                                                                  tmp_path):
  # The trained run has 2 layers; the config here 1. Its directory holds its own (2-layer)
  # bert_config.json: the warm start below reads the checkpoint alone.
  deep = trained[0] / "out"
  shallow = dict(TINY_CONFIG, num_hidden_layers=1)
  refused = run_pretraining(tmp_path, "--do_train", "--num_train_steps=1",
                            f"--init_checkpoint={deep}", config=shallow)
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1].endswith(
      f"does not fit {tmp_path / 'bert_config.json'}: the checkpoint has 2 encoder layers, the "
      "config 1")
  assert not list((tmp_path / "out").glob("model.ckpt-*"))
  partial = run_pretraining(tmp_path, "--do_train", "--num_train_steps=1",
                            f"--init_checkpoint={deep}", "--partial_init_checkpoint",
                            config=shallow)
  assert partial.returncode == 0, partial.stderr[-3000:]
  assert "checkpoint tensors not used: bert/encoder/layer_1/*" in partial.stderr


def test_evaluation_while_pretraining_on_a_held_out_file(tmp_path):
  held_out = write_records(tmp_path / "held_out.tfrecord", num_records=32, seed=1)
  result = run_pretraining(tmp_path, "--do_train", "--num_train_steps=6", "--eval_every_steps=3",
                           f"--eval_input_file={held_out}", "--max_eval_steps=2")
  assert result.returncode == 0, result.stderr[-3000:]
  history = [json.loads(line) for line in
             (tmp_path / "out" / "eval_history.jsonl").read_text().splitlines()]
  assert [entry["step"] for entry in history] == [3, 6]
  assert {"masked_lm_accuracy", "next_sentence_accuracy", "loss"} <= set(history[0]["metrics"])
  # Pretraining keeps no best checkpoint, and --do_eval was not asked for.
  assert not (tmp_path / "out" / "best").exists()
  assert not (tmp_path / "out" / "eval_results.txt").exists()


def create_sample_records(tmp_path, sample_vocab, name, max_seq_length, max_predictions,
                          *extra_flags):
  """create_pretraining_data.py on the shipped sample corpus; returns the records' path."""
  records = tmp_path / f"{name}.tfrecord"
  created = scripts.run_in_process(
      "create_pretraining_data.py", f"--input_file={SAMPLES_DIR / 'sample_corpus.txt'}",
      f"--output_file={records}", f"--vocab_file={sample_vocab}",
      f"--max_seq_length={max_seq_length}", f"--max_predictions_per_seq={max_predictions}",
      "--dupe_factor=1", "--num_workers=1", *extra_flags)
  assert created.returncode == 0, created.stderr[-2000:]
  return records


@pytest.fixture(scope="module")
def packed_records(sample_vocab, tmp_path_factory):
  """The sample corpus packed at max_seq_length 64, 10 predictions (rows of up to 3 instances)."""
  return create_sample_records(tmp_path_factory.mktemp("packed"), sample_vocab, "packed", 64, 10,
                               "--pack_sequences")


def test_two_phases_short_unpacked_then_long_packed_from_the_phase_one_checkpoint(
    tmp_path, sample_vocab, packed_records):
  """The original's recipe: most steps at 128, the rest at 512 from the phase-1 checkpoint with a
  fresh optimizer and schedule; here 32 then 64, phase 2 on packed records, evaluated on
  unpacked ones (mixed precision, XLA and gradient accumulation on in phase 2)."""
  vocab_size = sum(1 for _ in open(sample_vocab, encoding="utf-8"))
  config = dict(TINY_CONFIG, vocab_size=vocab_size)
  phase_1 = create_sample_records(tmp_path, sample_vocab, "phase1", 32, 5)
  packed = packed_records
  unpacked = create_sample_records(tmp_path, sample_vocab, "phase2_eval", 64, 10)
  first = run_pretraining(tmp_path, "--do_train", "--num_train_steps=8", "--seed=0",
                          config=config, records=phase_1)
  assert first.returncode == 0, first.stderr[-3000:]
  phase_1_dir = tmp_path / "out"
  phase_2_dir = tmp_path / "phase2_out"
  second = run_pretraining(
      tmp_path, "--do_train", "--do_eval", "--num_train_steps=6", "--num_warmup_steps=2",
      f"--init_checkpoint={phase_1_dir}", f"--output_dir={phase_2_dir}",
      "--max_seq_length=64", "--max_predictions_per_seq=10", f"--eval_input_file={unpacked}",
      "--mixed_precision=mixed_bfloat16", "--jit_compile", "--gradient_accumulation_steps=2",
      "--log_every_steps=1", "--seed=0", config=config, records=packed, run=scripts.run_script)
  assert second.returncode == 0, second.stderr[-3000:]
  assert "packed rows of up to 3 instances" in second.stderr
  # Every weight came from phase 1 (an --init_checkpoint loads weights only); the step and the
  # schedule start again: the first step's rate is the warm-up's first, the last checkpoint 6.
  initialised = next(line for line in second.stderr.splitlines() if "Initialised" in line)
  assert "trained from scratch): none;" in initialised, initialised
  first_step = next(line for line in second.stderr.splitlines() if "] step 1/6:" in line)
  assert "lr = 0," in first_step, first_step
  assert tf.train.latest_checkpoint(str(phase_2_dir)).endswith("model.ckpt-6")
  # A packed run's checkpoint holds exactly the variables of an unpacked run's.
  assert (dict(checkpoint_io.list_checkpoint_variables(str(phase_2_dir)))
          == dict(checkpoint_io.list_checkpoint_variables(str(phase_1_dir))))
  results = scripts.read_eval_results(phase_2_dir / "eval_results.txt")
  assert results["global_step"] == 6
  assert all(np.isfinite(value) for value in results.values())


@pytest.mark.parametrize("flag, expected", [
    ("--max_seq_length=32", "records of max_seq_length 64 (length of input_ids), but "
                            "--max_seq_length=32"),
    ("--max_sequences_per_pack=2", "packed records of up to 3 instances per row, more than "
                                   "--max_sequences_per_pack=2"),
    ("--max_predictions_per_seq=5", "records made with --max_predictions_per_seq=10 (13 "
                                    "masked_lm_positions for packs of up to 3 instances), but "
                                    "--max_predictions_per_seq=5"),
])
def test_packed_records_of_another_shape_fail_before_the_first_step(tmp_path, sample_vocab,
                                                                   packed_records, flag, expected):
  packed = packed_records
  vocab_size = sum(1 for _ in open(sample_vocab, encoding="utf-8"))
  result = run_pretraining(tmp_path, "--do_train", "--num_train_steps=2", "--max_seq_length=64",
                           "--max_predictions_per_seq=10", flag,
                           config=dict(TINY_CONFIG, vocab_size=vocab_size), records=packed)
  assert result.returncode == 1
  last_line = result.stderr.strip().splitlines()[-1]
  assert last_line.startswith("run_pretraining.py: error: ") and expected in last_line, last_line
  assert not (tmp_path / "out" / "checkpoint").exists()
